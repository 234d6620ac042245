"""Task priorities: the four submission queues and the order dispatch drains them in."""

from __future__ import annotations

from enum import StrEnum


class Priority(StrEnum):
    """A task's priority. Members equal their lowercase names (``Priority.HIGH == "high"``).

    ``rank`` orders them for dispatch (0 is most urgent) and is also the port offset of the
    priority's submission socket from the base port.
    """

    CRITICAL = "critical"
    HIGH = "high"
    NORMAL = "normal"
    LOW = "low"

    @property
    def rank(self) -> int:
        return _RANKS[self]

    @classmethod
    def parse(cls, value: Priority | str) -> Priority:
        """Accept a member or its name in any case; raise ``ValueError`` naming the choices."""
        if isinstance(value, Priority):
            return value
        try:
            return cls(str(value).lower())
        except ValueError:
            choices = ", ".join(p.value for p in cls)
            raise ValueError(f"unknown priority {value!r}: choose one of {choices}") from None

    @classmethod
    def by_rank(cls) -> tuple[Priority, ...]:
        """All priorities, most urgent first."""
        return _BY_RANK


_BY_RANK = (Priority.CRITICAL, Priority.HIGH, Priority.NORMAL, Priority.LOW)
_RANKS = {p: i for i, p in enumerate(_BY_RANK)}
