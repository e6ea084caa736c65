"""Tools: Python functions with type hints, exposed to the model as JSON-schema functions."""

from hookmesh.tools._tool import (
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
