"""What to optimize: tasks in the KernelBench format, their extras and the built-in suite."""

from kernelevo.tasks.loader import TaskError, load_task, resolve_task_path
from kernelevo.tasks.registry import builtin_names, builtin_path
from kernelevo.tasks.task import Task, default_tolerance

__all__ = [
    "Task",
    "TaskError",
    "builtin_names",
    "builtin_path",
    "default_tolerance",
    "load_task",
    "resolve_task_path",
]
