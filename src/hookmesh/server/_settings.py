"""What every service's configuration shares: flags over HOOKMESH_* variables over one YAML
file over defaults, merged by pydantic-settings' own sources."""

from __future__ import annotations

from contextvars import ContextVar
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import Field, ValidationError
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    YamlConfigSettingsSource,
)

from hookmesh.server._auth import AuthConfig

S = TypeVar("S", bound=BaseSettings)

_CONFIG_FILE: ContextVar[Path | None] = ContextVar("hookmesh_config_file", default=None)
"""The YAML file of the settings being built (sources are chosen per class, not per call)."""


class ServiceSettings(BaseSettings):
    """Base of the services' configs. Precedence, highest first: keyword arguments (the
    command's flags), environment variables, the YAML file, the defaults; nested mappings
    merge key by key."""

    auth: AuthConfig = Field(default_factory=AuthConfig)
    """Who may call: tokens, TLS, mTLS principals, trusted gateways (docs/security.md)."""
    metrics_listen: str = ""
    """``host:port`` of a Prometheus scrape endpoint (``GET /metrics``); empty: none."""
    metrics_allowed_hosts: list[str] = Field(default_factory=list)
    """Host headers the scrape endpoint accepts beyond the loopback ones (the address
    Prometheus scrapes, ``name`` or ``name:port``; ``*`` for any): others get 421."""
    metrics_token_env: str | None = None
    """Environment variable holding the tokens a scrape must send as ``authorization:
    Bearer`` (entries as in `auth.token_env`); unset: none is asked for."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        path = _CONFIG_FILE.get()
        if path is None:
            return (init_settings, env_settings)
        return (init_settings, env_settings, YamlConfigSettingsSource(settings_cls, path))


def load_settings(cls: type[S], path: str | Path | None, overrides: dict[str, Any]) -> S:
    """`cls` from `overrides`, its environment variables and the YAML file at `path`.

    Raises:
        ValueError: The file is unreadable or not a mapping; pydantic's ValidationError (a
            ValueError) names bad keys.
    """
    if path is not None:
        path = Path(path)
        try:
            loaded = yaml.safe_load(path.read_text())
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise ValueError(f"cannot read config {path}: {exc}") from None
        if not isinstance(loaded, dict | None):
            raise ValueError(f"config {path} must be a mapping at the top level")
    token = _CONFIG_FILE.set(path)
    try:
        return cls(**overrides)
    except ValidationError as exc:
        raise ValueError(describe_errors(exc, f"config {path}" if path else "config")) from None
    finally:
        _CONFIG_FILE.reset(token)


def describe_errors(exc: ValidationError, what: str) -> str:
    """One line naming each bad key: ``config x.yaml: agent.kind: Input should be …``."""
    problems = [
        f"{'.'.join(str(p) for p in error['loc']) or '(top level)'}: {error['msg']}"
        for error in exc.errors()
    ]
    return f"{what}: {'; '.join(problems)}"
