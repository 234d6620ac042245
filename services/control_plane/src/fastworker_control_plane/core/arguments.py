"""Checking submitted arguments against a task's signature, before accepting the task.

Subworkers send each task's parameter list when they register. Checking here lets a
submission with the wrong arguments fail at once with ``invalid_arguments`` instead of
being queued, dispatched and failing on a subworker later.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

from fastworker_protocol import Param, TaskSignature

_PLAIN = inspect.Parameter.POSITIONAL_OR_KEYWORD


class ArgumentChecker:
    """Validates ``(args, kwargs)`` against one task signature."""

    def __init__(self, signature: TaskSignature) -> None:
        self.name = signature.name
        self._signature = inspect.Signature([_parameter(p) for p in signature.params])
        params = signature.params
        # The common shape (plain positional parameters) is checked without inspect.
        self._plain = all(p.kind == _PLAIN.name for p in params)
        self._max_args = len(params)
        self._min_args = sum(1 for p in params if not p.has_default)

    def problem(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str | None:
        """``None`` if the call fits, else a message saying why not."""
        if self._plain and not kwargs and self._min_args <= len(args) <= self._max_args:
            return None
        try:
            self._signature.bind(*args, **kwargs)
        except TypeError as exc:
            return f"{self.name}(): {exc}"
        return None


_KINDS = {
    k.name: k
    for k in (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.VAR_POSITIONAL,
        inspect.Parameter.KEYWORD_ONLY,
        inspect.Parameter.VAR_KEYWORD,
    )
}


def _parameter(param: Param) -> inspect.Parameter:
    kind = _KINDS.get(param.kind, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    default = None if param.has_default else inspect.Parameter.empty
    return inspect.Parameter(param.name, kind, default=default)
