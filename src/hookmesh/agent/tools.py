"""Deprecated path of `hookmesh.tools` (kept for one release)."""

from hookmesh.tools import (
    MAX_ARGUMENT_DEPTH,
    Tool,
    ToolArgumentError,
    ToolInfo,
    Toolkit,
    external_tool,
    tool,
)

__all__ = [
    "MAX_ARGUMENT_DEPTH",
    "Tool",
    "ToolArgumentError",
    "ToolInfo",
    "Toolkit",
    "external_tool",
    "tool",
]
