"""The TTS service's configuration: one YAML file, overridable by HOOKMESH_TTS_* variables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from hookmesh.server import ServiceSettings, load_settings
from hookmesh.tts import DEFAULT_MAX_TEXT_CHARS


class TTSServiceConfig(ServiceSettings):
    """Everything `hookmesh serve tts` reads (see docs/services/tts.md)."""

    model_config = SettingsConfigDict(env_prefix="HOOKMESH_TTS_", extra="forbid")

    listen: str = "127.0.0.1:7003"
    """Address to serve on; port 0 picks a free one."""
    max_text_chars: int = Field(DEFAULT_MAX_TEXT_CHARS, ge=1, le=10_000_000)
    """Most characters one synthesis may speak (a stream counts all its deltas)."""
    max_concurrent: int = Field(8, ge=1, le=10_000)
    """Most syntheses at once (each is one espeak-ng process); more are RESOURCE_EXHAUSTED."""
    grace_seconds: float = Field(5.0, ge=0)
    """Seconds in-flight syntheses get to finish on shutdown before they are stopped."""
    espeak_binary: str = "espeak-ng"
    """The espeak-ng executable (a name on PATH or a path)."""


def load_tts_config(path: str | Path | None = None, **overrides: Any) -> TTSServiceConfig:
    """Read the YAML file at `path` (if any), then apply HOOKMESH_TTS_* variables and
    `overrides`.

    Raises:
        ValueError: The file is unreadable or invalid; the message names the bad keys.
    """
    return load_settings(TTSServiceConfig, path, overrides)
