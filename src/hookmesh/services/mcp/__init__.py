"""`hookmesh serve mcp`: retrieval, memory and speech as an MCP server (stdio or HTTP)."""

from hookmesh.services.mcp._app import (
    McpHttpServer,
    build_mcp_server,
    serve_mcp_stdio,
    start_mcp_http_server,
)
from hookmesh.services.mcp._callers import Caller, HookmeshTokenVerifier
from hookmesh.services.mcp._config import McpServerSettings, load_mcp_settings

__all__ = [
    "Caller",
    "HookmeshTokenVerifier",
    "McpHttpServer",
    "McpServerSettings",
    "build_mcp_server",
    "load_mcp_settings",
    "serve_mcp_stdio",
    "start_mcp_http_server",
]
