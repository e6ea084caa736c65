"""Tool-output reduction: truncate oversized tool results and clear old ones from the context."""

from hookmesh.middleware.builtin.reduction._middleware import (
    CLEARED_ARGUMENTS,
    CLEARED_EVENT,
    CLEARED_METADATA_KEY,
    FileStore,
    OffloadStore,
    ReductionMiddleware,
    safe_name,
)

__all__ = [
    "CLEARED_ARGUMENTS",
    "CLEARED_EVENT",
    "CLEARED_METADATA_KEY",
    "FileStore",
    "OffloadStore",
    "ReductionMiddleware",
    "safe_name",
]
