"""FastWorker subworker: discovers the control plane, registers its tasks and runs them."""

from fastworker_subworker.loader import TaskModuleError, load_task_modules
from fastworker_subworker.worker import Subworker, SubworkerConfig

__all__ = ["Subworker", "SubworkerConfig", "TaskModuleError", "load_task_modules"]
