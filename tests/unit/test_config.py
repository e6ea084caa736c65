"""The agent service's configuration: file, environment, errors, and docs that match."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from hookmesh.services.agent import _config as cfg
from hookmesh.services.agent import load_config

ROOT = Path(__file__).parents[2]


def test_defaults_run_a_scripted_agent() -> None:
    config = load_config()
    assert config.agent.model == "default"
    assert config.models["default"].type == "scripted"


def test_the_example_file_loads() -> None:
    config = load_config(ROOT / "services/agent/hookmesh.yaml")
    assert config.tools == ["hookmesh.demo:get_weather"]
    assert [m.type for m in config.middlewares] == ["local", "remote"]


def test_environment_overrides_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("agent:\n  name: from-file\n  kind: agentic\n")
    monkeypatch.setenv("HOOKMESH_AGENT__NAME", "from-env")
    config = load_config(path)
    assert (config.agent.name, config.agent.kind) == ("from-env", "agentic")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("agent: {kind: threaded}\n", "kind"),
        ("surprise: 1\n", "surprise"),
        ("agent: {model: missing}\n", "agent.model 'missing' is not one of models"),
        ("- a list\n", "must be a mapping"),
        ("middlewares: [{type: remote, timeout: -1}]\n", "timeout"),
    ],
)
def test_bad_config_names_the_key(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises((ValueError, ValidationError), match=message):
        load_config(path)


def _keys(model: type[BaseModel]) -> set[str]:
    return {field.alias or name for name, field in model.model_fields.items()}


@pytest.mark.parametrize(
    "model",
    [
        cfg.AgentServiceConfig,
        cfg.AgentSettings,
        cfg.ScriptedModelConfig,
        cfg.OpenAIModelConfig,
        cfg.LocalMiddlewareConfig,
        cfg.RemoteMiddlewareConfig,
        cfg.SidecarConfig,
    ],
)
def test_every_key_is_documented(model: Any) -> None:
    documented = set(
        re.findall(r"^\| `([a-z_]+)` \|", (ROOT / "docs/config.md").read_text(), flags=re.M)
    )
    missing = _keys(model) - documented - {"type"}
    assert not missing, f"docs/config.md lacks {sorted(missing)}"
