"""The A2A server's configuration: one YAML file, overridable by HOOKMESH_A2A_* variables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, field_validator
from pydantic_settings import SettingsConfigDict

from hookmesh.server import HttpGatewaySettings, load_settings


class A2AServerConfig(HttpGatewaySettings):
    """Everything `hookmesh serve a2a` reads (see docs/services/a2a.md); hosts, origins and
    HTTP limits as every gateway's (`HttpGatewaySettings`)."""

    model_config = SettingsConfigDict(env_prefix="HOOKMESH_A2A_", extra="forbid")

    listen: str = "127.0.0.1:7020"
    """HTTP address (JSON-RPC, HTTP+JSON and the agent card); port 0 picks a free one."""
    grpc_listen: str | None = None
    """Also serve A2A's gRPC transport here (``host:port``); off when unset."""
    agent: str = "127.0.0.1:7000"
    """``host:port`` of the agent service the tasks go to."""
    store: str = "sqlite:///hookmesh-data/a2a.db"
    """Where tasks are kept: ``sqlite:///path`` (one process), ``postgresql://...`` (shared by
    replicas: any of them answers for a task) or ``memory`` (lost on restart). A secret when
    it holds a password: never logged."""
    public_url: str = ""
    """Base URL the agent card advertises (behind a proxy); default ``http://<listen>``."""
    require_token: bool = False
    """The card requires the bearer scheme (set it when the agent service checks tokens)."""
    token_env: str | None = None
    """Environment variable holding the token the server itself sends when it reads the
    agent's description for the card (callers' tokens are passed through for tasks)."""
    version: str = "0.1.0"
    """The agent's version on the card."""
    run_timeout: float = Field(600.0, gt=0)
    """Seconds one task step (its whole agent call) may take."""
    max_tasks: int = Field(1000, ge=1, le=1_000_000)
    """Tasks kept in the store over all callers; one more evicts the oldest finished one (or,
    when none is, the oldest), so requests cannot grow the server without bound."""
    card_ttl_seconds: float = Field(30.0, ge=0)
    """How long the agent's description is reused for the card before it is read again."""
    grace_seconds: float = Field(5.0, ge=0)
    """On shutdown, running streams get this long before they are cancelled."""

    @field_validator("store")
    @classmethod
    def _known_store(cls, value: str) -> str:
        if value != "memory" and not value.startswith(
            ("sqlite:///", "postgresql://", "postgres://")
        ):
            raise ValueError("is memory, sqlite:///path or postgresql://...")
        return value


def load_a2a_config(path: str | Path | None = None, **overrides: Any) -> A2AServerConfig:
    """Read the YAML file at `path` (if any), then apply HOOKMESH_A2A_* variables and
    `overrides`.

    Raises:
        ValueError: The file is unreadable or invalid; the message names the bad keys.
    """
    return load_settings(A2AServerConfig, path, overrides)
