"""A board that records every transition of its operations and keeps their effects until
taken: what the engine does for its journal, for tests that journal a board alone."""

from __future__ import annotations

from typing import Any

from fastworker_control_plane.core.board import TaskBoard
from fastworker_control_plane.core.effects import Effects


class RecordingBoard(TaskBoard):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kept = Effects(record=True)

    def take(self) -> Effects:
        """The effects kept since the last call."""
        kept, self.kept = self.kept, Effects(record=True)
        return kept

    def _keep(self, out: Any) -> Any:
        self.kept.add(out if isinstance(out, Effects) else out[-1])
        return out

    def submit(self, *args: Any, **kwargs: Any) -> Any:
        return self._keep(super().submit(*args, record=True, **kwargs))

    def submit_each(self, *args: Any, **kwargs: Any) -> Any:
        return self._keep(super().submit_each(*args, record=True, **kwargs))

    def release_due(self, *args: Any, **kwargs: Any) -> Any:
        return self._keep(super().release_due(*args, record=True, **kwargs))

    def register(self, *args: Any, **kwargs: Any) -> Any:
        return self._keep(super().register(*args, record=True, **kwargs))

    def remove_worker(self, *args: Any, **kwargs: Any) -> Any:
        return self._keep(super().remove_worker(*args, record=True, **kwargs))

    def expire_silent(self, *args: Any, **kwargs: Any) -> Any:
        return self._keep(super().expire_silent(*args, record=True, **kwargs))

    def dispatch(self, *args: Any, **kwargs: Any) -> Any:
        return self._keep(super().dispatch(*args, record=True, **kwargs))

    def heard(self, *args: Any, **kwargs: Any) -> Any:
        return self._keep(super().heard(*args, record=True, **kwargs))

    def report(self, *args: Any, **kwargs: Any) -> Any:
        return self._keep(super().report(*args, record=True, **kwargs))

    def time_out_overdue(self, *args: Any, **kwargs: Any) -> Any:
        return self._keep(super().time_out_overdue(*args, record=True, **kwargs))

    def cancel(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["record"] = True  # queue_controls.purge asks for it itself
        return self._keep(super().cancel(*args, **kwargs))
