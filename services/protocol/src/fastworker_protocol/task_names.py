"""Task names, and the shorter names that stand for them.

A task's name is module-qualified by default (``billing.tasks.notify``), so two modules'
``notify`` never collide. A caller may still name it by a dotted suffix (``notify``,
``tasks.notify``) when that suffix belongs to exactly one registered name: the control
plane, eager mode and the test cluster all resolve a submitted name with
:func:`resolve_task_name`, against a :class:`TaskNames` index they keep as names are
registered. A registered name always stands for itself, even when it is also the suffix of
longer ones. Pure: no I/O, nothing imported of FastWorker's.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping


class AmbiguousTaskName(ValueError):
    """A short name that is the dotted suffix of several registered names."""

    def __init__(self, name: str, candidates: Iterable[str]) -> None:
        self.name = name
        self.candidates = sorted(candidates)
        super().__init__(
            f"task name {name!r} is ambiguous: {', '.join(self.candidates)}; give the full name"
        )


def dotted_suffixes(name: str) -> list[str]:
    """``name`` and every shorter dotted suffix of it, longest first:
    ``"a.b.c"`` gives ``["a.b.c", "b.c", "c"]`` (a suffix with an empty part, as in
    ``"a..b"``, is none)."""
    parts = name.split(".")
    shorter = [".".join(parts[i:]) for i in range(1, len(parts)) if all(parts[i:])]
    return [name, *shorter]


def resolve_task_name(name: str, by_suffix: Mapping[str, Collection[str]]) -> str | None:
    """The registered name ``name`` stands for, or ``None`` if it stands for none.

    ``by_suffix`` maps each dotted suffix of every registered name (the whole name
    included) to the registered names ending with it, as :class:`TaskNames` keeps it.
    Raises :class:`AmbiguousTaskName` when ``name`` is not registered itself and ends
    several registered names."""
    candidates = by_suffix.get(name)
    if not candidates:
        return None
    if name in candidates:  # registered as given: it is itself, however short
        return name
    if len(candidates) > 1:
        raise AmbiguousTaskName(name, candidates)
    return next(iter(candidates))


class TaskNames:
    """The registered task names, indexed by every dotted suffix, so a lookup is one dict
    access however many names there are."""

    def __init__(self, names: Iterable[str] = ()) -> None:
        self._by_suffix: dict[str, set[str]] = {}
        for name in names:
            self.add(name)

    def add(self, name: str) -> None:
        for suffix in dotted_suffixes(name):
            self._by_suffix.setdefault(suffix, set()).add(name)

    def discard(self, name: str) -> None:
        for suffix in dotted_suffixes(name):
            names = self._by_suffix.get(suffix)
            if names is not None:
                names.discard(name)
                if not names:
                    del self._by_suffix[suffix]

    def resolve(self, name: str) -> str | None:
        """The registered name ``name`` stands for (see :func:`resolve_task_name`)."""
        return resolve_task_name(name, self._by_suffix)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._by_suffix.get(name, ())
