"""Tools: Python functions with type hints, exposed to the model as JSON-schema functions, and
the context a tool's run may receive."""

from hookmesh.tools._context import AbortReply, ToolContext, ToolError, idempotency_key
from hookmesh.tools._tool import (
    MAX_ARGUMENT_DEPTH,
    Tool,
    ToolArgumentError,
    ToolInfo,
    Toolkit,
    ToolPiece,
    external_tool,
    tool,
)

__all__ = [
    "MAX_ARGUMENT_DEPTH",
    "AbortReply",
    "Tool",
    "ToolArgumentError",
    "ToolContext",
    "ToolError",
    "ToolInfo",
    "ToolPiece",
    "Toolkit",
    "external_tool",
    "idempotency_key",
    "tool",
]
