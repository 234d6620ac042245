"""The live dashboard: its HTTP routes, JSON views and static page."""
