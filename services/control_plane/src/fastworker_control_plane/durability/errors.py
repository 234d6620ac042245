"""The one error the durability layer raises to its callers."""

from __future__ import annotations


class JournalError(Exception):
    """The journal cannot be used: another process holds it, it cannot be read or
    written, or it is damaged (the message says which, and what to do)."""


class NotLeading(JournalError):
    """A replicated control plane is no longer the leader: nothing it holds may be
    acknowledged (its followers may never have it)."""
