"""The agent service's configuration: file, environment, errors, and docs that match."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from hookmesh.models import DemoModelConfig, OpenAIModelConfig, ScriptedModelConfig
from hookmesh.services.agent import _config as cfg
from hookmesh.services.agent import load_config

ROOT = Path(__file__).parents[2]


def test_defaults_run_a_scripted_agent() -> None:
    config = load_config()
    assert config.agent.model == "default"
    assert config.models["default"].type == "scripted"


def test_the_example_file_loads() -> None:
    config = load_config(ROOT / "deploy/container/agent.yaml")
    assert config.tools == ["hookmesh.suite.demo:get_weather"]
    assert [m.type for m in config.middlewares] == ["local"] * 4 + ["remote"]
    assert config.store.startswith("postgresql://") and config.auth.token_file


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
        (
            "middlewares: [{type: remote, breaker: {misses: 0}}]\n",
            "middlewares.0.remote.breaker.misses: Input should be greater than or equal to 1",
        ),
        (
            "middlewares: [{type: remote, breaker: {backoff_seconds: .nan}}]\n",
            "middlewares.0.remote.breaker.backoff_seconds: Input should be a finite number",
        ),
        (
            "middlewares: [{type: remote, breaker: {backoff_seconds: 0}}]\n",
            "breaker.backoff_seconds: Input should be greater than 0",
        ),
        (
            "middlewares: [{type: remote, breaker: {backoff_seconds: 9, max_backoff_seconds: 2}}]",
            r"max_backoff_seconds \(2\) must be at least backoff_seconds \(9\)",
        ),
        ("middlewares: [{type: remote, breaker: {misses: 2, retries: 1}}]\n", "breaker.retries"),
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
        ScriptedModelConfig,
        OpenAIModelConfig,
        cfg.LocalMiddlewareConfig,
        cfg.RemoteMiddlewareConfig,
        cfg.BreakerConfig,
        cfg.RolloutConfig,
        cfg.LocalRolloutConfig,
        cfg.SidecarConfig,
        cfg.SessionsConfig,
        cfg.DurabilityConfig,
    ],
)
def test_every_key_is_documented(model: Any) -> None:
    documented = set(
        re.findall(r"^\| `([a-z_]+)` \|", (ROOT / "docs/config.md").read_text(), flags=re.M)
    )
    missing = _keys(model) - documented - {"type"}
    assert not missing, f"docs/config.md lacks {sorted(missing)}"


def _loaders() -> list[tuple[str, Any, str]]:
    from hookmesh.services.memory import load_memory_config
    from hookmesh.services.retrieval import load_retrieval_config
    from hookmesh.services.tts import load_tts_config

    return [
        ("agent", load_config, "HOOKMESH_"),
        ("retrieval", load_retrieval_config, "HOOKMESH_RETRIEVAL_"),
        ("memory", load_memory_config, "HOOKMESH_MEMORY_"),
        ("tts", load_tts_config, "HOOKMESH_TTS_"),
    ]


@pytest.mark.parametrize(("service", "load", "prefix"), _loaders(), ids=lambda v: str(v)[:12])
def test_flags_beat_environment_beat_file_beat_defaults(
    service: str, load: Any, prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / f"{service}.yaml"
    path.write_text("listen: 127.0.0.1:1111\ngrace_seconds: 7\n")
    default = load(None)
    assert (default.listen, default.grace_seconds) != ("127.0.0.1:1111", 7)
    from_file = load(path)
    assert (from_file.listen, from_file.grace_seconds) == ("127.0.0.1:1111", 7)
    monkeypatch.setenv(f"{prefix}LISTEN", "127.0.0.1:2222")
    from_env = load(path)
    assert (from_env.listen, from_env.grace_seconds) == ("127.0.0.1:2222", 7)
    from_flag = load(path, listen="127.0.0.1:3333")
    assert (from_flag.listen, from_flag.grace_seconds) == ("127.0.0.1:3333", 7)


def test_a_nested_environment_variable_keeps_the_files_siblings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("agent:\n  name: from-file\n  system_prompt: Be brief.\n")
    monkeypatch.setenv("HOOKMESH_AGENT__NAME", "from-env")
    config = load_config(path, agent={"max_iters": 3})
    assert (config.agent.name, config.agent.system_prompt, config.agent.max_iters) == (
        "from-env",
        "Be brief.",
        3,
    )


def test_a_missing_config_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot read config"):
        load_config(tmp_path / "nope.yaml")


def test_every_auth_key_is_documented() -> None:
    from hookmesh.services import AuthConfig

    documented = set(
        re.findall(r"^\| `([a-z_.]+)` \|", (ROOT / "docs/security.md").read_text(), flags=re.M)
    )
    assert _keys(AuthConfig) <= documented, sorted(_keys(AuthConfig) - documented)


def test_openai_base_url_picks_the_model_of_up_and_the_demo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hookmesh.suite import default_suite_config, describe_model
    from hookmesh.suite.demo import demo_config

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    for config in (default_suite_config(tmp_path), demo_config(str(tmp_path))):
        assert isinstance(config.models[config.agent.model], DemoModelConfig)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1")
    monkeypatch.setenv("OPENAI_MODEL", "smollm2")
    for config in (default_suite_config(tmp_path), demo_config(str(tmp_path))):
        model = config.models[config.agent.model]
        assert isinstance(model, OpenAIModelConfig)
        assert (model.base_url, model.model) == ("http://127.0.0.1:8080/v1", "smollm2")
        assert describe_model(config) == "smollm2 at http://127.0.0.1:8080/v1"
