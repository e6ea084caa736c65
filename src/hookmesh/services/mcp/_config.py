"""`hookmesh serve mcp`'s configuration: one YAML file, overridable by HOOKMESH_MCP_* variables."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from hookmesh.server import HttpGatewaySettings, load_settings


class McpServerSettings(HttpGatewaySettings):
    """Everything `hookmesh serve mcp` reads (see docs/services/mcp.md).

        ``auth`` (as every service's) says who may call over HTTP: its tokens map callers to
        principals. Over stdio, and over HTTP without tokens, the caller is `user` (over stdio
    calling with `token_env`).
        Over HTTP, hosts, origins and limits are every gateway's (`HttpGatewaySettings`).
    """

    model_config = SettingsConfigDict(env_prefix="HOOKMESH_MCP_", extra="forbid")

    transport: Literal["stdio", "http"] = "stdio"
    """``stdio`` (an MCP client starts the command) or ``http`` (streamable HTTP)."""
    listen: str = "127.0.0.1:7030"
    """HTTP address (``http`` only); the endpoint is ``/mcp``."""
    retrieval: str | None = "127.0.0.1:7002"
    """The retrieval service (``host:port``); None leaves its tool out."""
    memory: str | None = "127.0.0.1:7004"
    """The memory service; None leaves its tools out."""
    tts: str | None = "127.0.0.1:7003"
    """The TTS service; None leaves its tool and resource out."""
    knowledge_bases: list[str] = Field(default_factory=list)
    """Knowledge bases the search tool offers; empty: every base the caller may read."""
    user: str = "local"
    """The user whose memories the tools read and write over stdio, and over HTTP when no
    `auth` names callers (with tokens, each caller is its own principal)."""
    token_env: str | None = None
    """stdio: environment variable holding the token sent to the services (a secret)."""
    timeout: float = Field(30.0, gt=0)
    """Seconds one service call may take."""
    max_speech_chars: int = Field(2000, ge=1)
    """Longest text the speak tool accepts."""
    grace_seconds: float = Field(5.0, ge=0)
    """On shutdown, open requests get this long."""


def load_mcp_settings(path: str | Path | None = None, **overrides: Any) -> McpServerSettings:
    """Read the YAML file at `path` (if any), then apply HOOKMESH_MCP_* variables and
    `overrides`.

    Raises:
        ValueError: The file is unreadable or invalid; the message names the bad keys.
    """
    return load_settings(McpServerSettings, path, overrides)
