"""Filesystem tools: ls, read_file, write_file, edit_file, glob, grep (and an opt-in execute)"""

from hookmesh.middleware.builtin.filesystem._middleware import (
    DEFAULT_NOTE,
    MEDIA_TYPES,
    TOOL_NAMES,
    WRITE_TOOLS,
    FilesystemMiddleware,
    FileToolError,
)

__all__ = [
    "DEFAULT_NOTE",
    "MEDIA_TYPES",
    "TOOL_NAMES",
    "WRITE_TOOLS",
    "FileToolError",
    "FilesystemMiddleware",
]
