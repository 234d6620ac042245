"""Integrations of the client with web frameworks (each needs its framework installed)."""
