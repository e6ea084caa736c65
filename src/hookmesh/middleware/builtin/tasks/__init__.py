"""Plan and tasks: task tools, the task list shown to the model at every step, kept per session."""

from hookmesh.middleware.builtin.tasks._middleware import (
    HINT_HEADER,
    TASKS_METADATA_KEY,
    TasksMiddleware,
)

__all__ = [
    "HINT_HEADER",
    "TASKS_METADATA_KEY",
    "TasksMiddleware",
]
