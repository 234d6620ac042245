"""FastWorker subworker: discovers the control plane, registers its tasks and runs them.

Its names are imported on first use: a process pool's child imports this package for its
own small module, without the subworker's sockets and event loop (0.2 s of start-up).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fastworker_subworker.config import SubworkerConfig
    from fastworker_subworker.loader import TaskModuleError, load_task_modules
    from fastworker_subworker.worker import Subworker

__all__ = ["Subworker", "SubworkerConfig", "TaskModuleError", "load_task_modules"]

_HOMES = {
    "Subworker": "fastworker_subworker.worker",
    "SubworkerConfig": "fastworker_subworker.config",
    "TaskModuleError": "fastworker_subworker.loader",
    "load_task_modules": "fastworker_subworker.loader",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
