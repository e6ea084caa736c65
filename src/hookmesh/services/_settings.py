"""What every service's configuration shares: a YAML file under HOOKMESH_* variables."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

S = TypeVar("S", bound=BaseSettings)


class ServiceSettings(BaseSettings):
    """Base of the services' configs: environment variables override the file's values,
    which override the defaults."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (env_settings, init_settings)


def load_settings(cls: type[S], path: str | Path | None, overrides: dict[str, Any]) -> S:
    """`cls` from the YAML file at `path` (if any), its environment variables and `overrides`.

    Raises:
        ValueError: The file is unreadable or not a mapping; pydantic's ValidationError (a
            ValueError) names bad keys.
    """
    data: dict[str, Any] = {}
    if path is not None:
        try:
            loaded = yaml.safe_load(Path(path).read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ValueError(f"cannot read config {path}: {exc}") from None
        if not isinstance(loaded, dict):
            raise ValueError(f"config {path} must be a mapping at the top level")
        data = loaded
    data.update(overrides)
    return cls(**data)
