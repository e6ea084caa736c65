"""Long-term memory: recall facts about the user at reply start, remember the turn after it."""

from hookmesh.middleware.builtin.memory._middleware import (
    DEFAULT_HINT_TEMPLATE,
    DEFAULT_PROMPT_NOTE,
    DEFAULT_RECALL_THRESHOLD,
    WARNING_EVENT,
    ControlMode,
    MemoryMiddleware,
    MemoryUnavailableError,
    WriteMode,
)

__all__ = [
    "DEFAULT_HINT_TEMPLATE",
    "DEFAULT_PROMPT_NOTE",
    "DEFAULT_RECALL_THRESHOLD",
    "WARNING_EVENT",
    "ControlMode",
    "MemoryMiddleware",
    "MemoryUnavailableError",
    "WriteMode",
]
