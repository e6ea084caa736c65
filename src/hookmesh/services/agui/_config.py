"""The AG-UI gateway's configuration: one YAML file, overridable by HOOKMESH_AGUI_* variables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from hookmesh.server import HttpGatewaySettings, load_settings


class AguiGatewayConfig(HttpGatewaySettings):
    """Everything `hookmesh serve agui` reads (see docs/services/agui.md)."""

    model_config = SettingsConfigDict(env_prefix="HOOKMESH_AGUI_", extra="forbid")

    listen: str = "127.0.0.1:7010"
    """HTTP address to serve on; port 0 picks a free one."""
    agent: str = "127.0.0.1:7000"
    """``host:port`` of the agent service the runs go to."""
    max_request_bytes: int = Field(8 * 1024 * 1024, ge=1024, le=256 * 1024 * 1024)
    """Largest RunAgentInput body accepted (images travel inside it, base64 encoded);
    larger ones get 413. Hosts, origins and the other HTTP limits: `HttpGatewaySettings`."""
    run_timeout: float = Field(300.0, gt=0)
    """Seconds one run (its whole agent call) may take."""
    keepalive_seconds: float = Field(15.0, gt=0)
    """An SSE comment is sent after this long without an event, so proxies keep the
    stream open."""
    grace_seconds: float = Field(5.0, ge=0)
    """On shutdown, running streams get this long before they are cancelled (which
    interrupts their replies)."""


def load_agui_config(path: str | Path | None = None, **overrides: Any) -> AguiGatewayConfig:
    """Read the YAML file at `path` (if any), then apply HOOKMESH_AGUI_* variables and
    `overrides`.

    Raises:
        ValueError: The file is unreadable or invalid; the message names the bad keys.
    """
    return load_settings(AguiGatewayConfig, path, overrides)
