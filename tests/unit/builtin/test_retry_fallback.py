"""Model retries, tool retries and model fallback: both kinds, in process and via a sidecar."""

from __future__ import annotations

from typing import Any

import pytest

from hookmesh.agent import Agent, tool
from hookmesh.middleware.builtin.fallback import FALLBACK_EVENT, ModelFallbackMiddleware
from hookmesh.middleware.builtin.retry import (
    ModelRetryMiddleware,
    RetryPolicy,
    ToolRetryMiddleware,
)
from hookmesh.models import ScriptedChatModel, ScriptedTurn
from hookmesh.schema import MessageKind, text_of, tool_results
from tests.agent_helpers import collect, customs, types
from tests.conftest import Attach
from tests.model_helpers import FlakyModel

pytestmark = pytest.mark.timeout(60)

NO_WAIT = RetryPolicy(max_attempts=3, initial_delay=0.0, jitter=0.0)
"""Retries at once: the tests count attempts, they do not wait for backoff."""


# --- ModelRetryMiddleware ----------------------------------------------------------------------


@pytest.mark.parametrize("at", ["call", "first_chunk"])
async def test_a_failing_model_call_is_retried_until_it_answers(
    kind: MessageKind, attach: Attach, at: str
) -> None:
    model = FlakyModel(["hello"], failures=2, at=at)
    agent = Agent(model, kind=kind, middlewares=[await attach(ModelRetryMiddleware(NO_WAIT))])
    events = await collect(agent.reply("hi"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert model.calls == 3
    assert agent.final_message is not None and text_of(agent.final_message) == "hello"
    # One model call as far as the events go: the attempts are inside it.
    assert types(events).count("model_call_start") == types(events).count("model_call_end") == 1


async def test_a_client_error_is_not_retried(kind: MessageKind, attach: Attach) -> None:
    model = FlakyModel(["hello"], failures=1, status=400)
    agent = Agent(model, kind=kind, middlewares=[await attach(ModelRetryMiddleware(NO_WAIT))])
    events = await collect(agent.reply("hi"))
    end = events[-1]
    assert end.finish_reason == "error"  # type: ignore[union-attr]
    assert end.error.reason == "MODEL_ERROR"  # type: ignore[union-attr]
    assert end.error.metadata["httpStatus"] == "400"  # type: ignore[union-attr]
    assert model.calls == 1


async def test_retries_give_up_after_max_attempts(kind: MessageKind) -> None:
    model = FlakyModel(["hello"], failures=5)
    agent = Agent(model, kind=kind, middlewares=[ModelRetryMiddleware(NO_WAIT)])
    events = await collect(agent.reply("hi"))
    assert events[-1].error.message == "flaky is overloaded"  # type: ignore[union-attr]
    assert model.calls == 3


# --- ToolRetryMiddleware -----------------------------------------------------------------------


class Flaky:
    """A tool body failing its first `failures` runs."""

    def __init__(self, failures: int, error: type[Exception] = TimeoutError) -> None:
        self.failures = failures
        self.error = error
        self.runs = 0

    def __call__(self, city: str) -> str:
        self.runs += 1
        if self.runs <= self.failures:
            raise self.error(f"weather service busy ({self.runs})")
        return f"sunny in {city}"


def _weather_agent(kind: MessageKind, body: Flaky, mw: Any, **flags: Any) -> Agent:
    weather = tool(body.__call__, name="weather", **flags)
    turns = [ScriptedTurn(tool_calls=[("weather", {"city": "Oslo"})]), "done"]
    return Agent(ScriptedChatModel(turns), kind=kind, tools=[weather], middlewares=[mw])


@pytest.mark.parametrize("flags", [{"idempotent": True}, {"read_only": True}])
async def test_a_safe_tool_is_retried_and_the_client_sees_one_clean_result(
    kind: MessageKind, attach: Attach, flags: dict[str, bool]
) -> None:
    body = Flaky(failures=2)
    agent = _weather_agent(kind, body, await attach(ToolRetryMiddleware(NO_WAIT)), **flags)
    events = await collect(agent.reply("weather?"))
    assert body.runs == 3
    assert types(events).count("tool_result_start") == 1
    deltas = [e.text for e in events if e.type == "tool_result_delta"]  # type: ignore[union-attr]
    assert deltas == ["sunny in Oslo"]
    assert [(r.state, r.text) for m in agent.state.context for r in tool_results(m)] == [
        ("success", "sunny in Oslo")
    ]


async def test_a_tool_marked_safe_by_name_is_retried(kind: MessageKind, attach: Attach) -> None:
    body = Flaky(failures=1)
    mw = await attach(ToolRetryMiddleware(NO_WAIT, safe_tools=["weather"]))
    agent = _weather_agent(kind, body, mw)
    await collect(agent.reply("weather?"))
    assert body.runs == 2


async def test_a_non_idempotent_tool_is_never_retried(kind: MessageKind, attach: Attach) -> None:
    body = Flaky(failures=1)
    agent = _weather_agent(kind, body, await attach(ToolRetryMiddleware(NO_WAIT)))
    events = await collect(agent.reply("weather?"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert body.runs == 1
    [result] = [r for m in agent.state.context for r in tool_results(m)]
    assert (result.state, result.text) == ("error", "Error: TimeoutError: weather service busy (1)")


async def test_only_the_named_error_types_are_retried(kind: MessageKind) -> None:
    body = Flaky(failures=1, error=ValueError)
    mw = ToolRetryMiddleware(NO_WAIT, error_types=["TimeoutError"])
    agent = _weather_agent(kind, body, mw, idempotent=True)
    await collect(agent.reply("weather?"))
    assert body.runs == 1
    timeouts = Flaky(failures=1)
    agent = _weather_agent(kind, timeouts, mw, idempotent=True)
    await collect(agent.reply("weather?"))
    assert timeouts.runs == 2


async def test_the_last_failure_is_the_result_when_retries_run_out(kind: MessageKind) -> None:
    body = Flaky(failures=9)
    agent = _weather_agent(kind, body, ToolRetryMiddleware(NO_WAIT), idempotent=True)
    events = await collect(agent.reply("weather?"))
    assert body.runs == 3
    assert types(events).count("tool_result_start") == 1
    [result] = [r for m in agent.state.context for r in tool_results(m)]
    assert (result.state, result.text) == ("error", "Error: TimeoutError: weather service busy (3)")


# --- ModelFallbackMiddleware -------------------------------------------------------------------


@pytest.mark.parametrize("at", ["call", "first_chunk"])
async def test_fallback_moves_on_to_the_next_model_and_says_which_answered(
    kind: MessageKind, attach: Attach, at: str
) -> None:
    primary = FlakyModel(["never"], failures=9, at=at, model_name="primary")
    second = FlakyModel(["never"], failures=9, model_name="second")
    backup = ScriptedChatModel(["from the backup"], stream=at == "first_chunk", model_name="backup")
    mw = await attach(ModelFallbackMiddleware(["second", "backup"]))
    models = {"second": second, "backup": backup}
    agent = Agent(primary, kind=kind, middlewares=[mw], models=models)
    events = await collect(agent.reply("hi"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert (primary.calls, second.calls, backup.calls) == (1, 1, 1)
    start = next(e for e in events if e.type == "model_call_start")
    end = next(e for e in events if e.type == "model_call_end")
    assert (start.model_name, end.model_name) == ("primary", "backup")  # type: ignore[union-attr]
    moves = [c.value for c in customs(events) if c.name == FALLBACK_EVENT]
    assert [(m["failed"], m["next"]) for m in moves] == [
        ("primary", "second"),
        ("second", "backup"),
    ]
    assert moves[0]["error"] == "MODEL_ERROR: primary is overloaded"
    assert agent.final_message is not None
    assert (text_of(agent.final_message), agent.final_message.name) == ("from the backup", "backup")


async def test_fallback_passes_errors_it_does_not_handle(kind: MessageKind, attach: Attach) -> None:
    primary = FlakyModel(["never"], failures=9, status=401, model_name="primary")
    backup = ScriptedChatModel(["from the backup"], model_name="backup")
    mw = await attach(ModelFallbackMiddleware([backup], statuses={429, 503}))
    agent = Agent(primary, kind=kind, middlewares=[mw])
    events = await collect(agent.reply("hi"))
    assert events[-1].error.metadata["httpStatus"] == "401"  # type: ignore[union-attr]
    assert backup.calls == 0


async def test_retry_inside_fallback_retries_each_model(kind: MessageKind) -> None:
    primary = FlakyModel(["never"], failures=9, model_name="primary")
    backup = FlakyModel(["from the backup"], failures=2, model_name="backup")
    agent = Agent(
        primary,
        kind=kind,
        middlewares=[ModelFallbackMiddleware([backup]), ModelRetryMiddleware(NO_WAIT)],
    )
    events = await collect(agent.reply("hi"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert (primary.calls, backup.calls) == (3, 3)


async def test_a_model_name_the_agent_does_not_know_ends_the_reply(kind: MessageKind) -> None:
    primary = FlakyModel(["never"], failures=1, model_name="primary")
    agent = Agent(primary, kind=kind, middlewares=[ModelFallbackMiddleware(["backup"])])
    events = await collect(agent.reply("hi"))
    error = events[-1].error  # type: ignore[union-attr]
    assert (error.reason, error.metadata["model"]) == ("UNKNOWN_MODEL", "backup")


def test_settings_are_checked_when_built() -> None:
    with pytest.raises(ValueError, match="at least one fallback"):
        ModelFallbackMiddleware([])
    with pytest.raises(ValueError, match="ChatModels or model names"):
        ModelFallbackMiddleware([3])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="max_attempts must be at least 1"):
        ModelRetryMiddleware({"max_attempts": 0})
    with pytest.raises(ValueError, match="multiplier must be at least 1"):
        ToolRetryMiddleware({"multiplier": 0.5})
