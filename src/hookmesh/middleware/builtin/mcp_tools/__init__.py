"""MCP tools: every tool of the configured MCP servers, as tools of the agent."""

from hookmesh.middleware.builtin.mcp_tools._middleware import (
    WARNING_EVENT,
    McpServerConfig,
    McpServerUnavailableError,
    McpToolError,
    McpToolsMiddleware,
)

__all__ = [
    "WARNING_EVENT",
    "McpServerConfig",
    "McpServerUnavailableError",
    "McpToolError",
    "McpToolsMiddleware",
]
