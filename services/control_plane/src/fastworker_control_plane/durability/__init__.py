"""The durable control plane: an append-only journal of task transitions, replayed on
start (see ``journal`` for the file, ``entries`` for what it holds)."""
