"""Call limits and timeouts: both kinds, in process and via a sidecar."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from hookmesh.agent import Agent, tool
from hookmesh.middleware.builtin.call_limits import (
    CALL_LIMIT_EVENT,
    DEFAULT_HINT,
    STOP_REASON,
    CallLimitMiddleware,
)
from hookmesh.middleware.builtin.retry import ModelRetryMiddleware, RetryPolicy
from hookmesh.middleware.builtin.timeouts import TimeoutMiddleware
from hookmesh.models import ScriptedChatModel, ScriptedTurn
from hookmesh.schema import Message, MessageKind, is_hint, text_of, tool_results
from tests.agent_helpers import collect, customs, echo
from tests.conftest import Attach

pytestmark = pytest.mark.timeout(60)


def tool_loving(seen: list[tuple[str, list[Message]]]) -> Any:
    """A model that calls echo whenever it may, and answers only when it may not."""

    def script(messages: Sequence[Message], tools: Any, tool_choice: str) -> ScriptedTurn:
        seen.append((tool_choice, list(messages)))
        if tool_choice == "none":
            return ScriptedTurn(text="Final answer.")
        return ScriptedTurn(tool_calls=[("echo", {"text": "again"})])

    return script


async def test_the_last_allowed_call_must_answer(kind: MessageKind, attach: Attach) -> None:
    seen: list[tuple[str, list[Message]]] = []
    mw = await attach(CallLimitMiddleware(model_calls_per_reply=3))
    agent = Agent(ScriptedChatModel(tool_loving(seen)), kind=kind, tools=[echo], middlewares=[mw])
    events = await collect(agent.reply("go"))
    assert [choice for choice, _ in seen] == ["auto", "auto", "none"]
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert agent.final_message is not None and text_of(agent.final_message) == "Final answer."
    # The hint was in the last prompt only, never in the context.
    assert [text_of(m) for m in seen[-1][1] if is_hint(m)] == [DEFAULT_HINT]
    assert not any(is_hint(m) for m in agent.state.context)
    [limit] = [c.value for c in customs(events) if c.name == CALL_LIMIT_EVENT]
    assert limit == {"limit": "model_calls_per_reply", "max": 3, "action": "final_answer"}


async def test_end_mode_stops_before_the_call_over_the_limit(
    kind: MessageKind, attach: Attach
) -> None:
    seen: list[tuple[str, list[Message]]] = []
    mw = await attach(CallLimitMiddleware(model_calls_per_reply=2, on_limit="end"))
    agent = Agent(ScriptedChatModel(tool_loving(seen)), kind=kind, tools=[echo], middlewares=[mw])
    events = await collect(agent.reply("go"))
    assert len(seen) == 2  # the third call never reached the model
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    final = agent.final_message
    assert final is not None
    assert text_of(final) == "I stopped here: the limit of 2 model calls per reply is reached."
    ends = [e for e in events if e.type == "model_call_end"]
    assert ends[-1].stop_reason == STOP_REASON  # type: ignore[union-attr]


async def test_a_session_limit_counts_earlier_replies(kind: MessageKind, attach: Attach) -> None:
    mw = await attach(CallLimitMiddleware(model_calls_per_session=3, on_limit="end"))
    turns = ["one", "two", "three", "four"]
    agent = Agent(ScriptedChatModel(turns), kind=kind, middlewares=[mw])
    for _ in range(3):
        await collect(agent.reply("hi"))
    events = await collect(agent.reply("hi"))
    assert agent.model.calls == 3  # type: ignore[attr-defined]
    assert text_of(agent.final_message).endswith("3 model calls per session is reached.")  # type: ignore[arg-type]
    assert [c.value["action"] for c in customs(events) if c.name == CALL_LIMIT_EVENT] == ["end"]


@pytest.mark.parametrize("on_limit", ["final_answer", "end"])
async def test_a_tool_limit_denies_the_call_and_the_reply_finishes(
    kind: MessageKind, attach: Attach, on_limit: Any
) -> None:
    seen: list[tuple[str, list[Message]]] = []
    mw = await attach(CallLimitMiddleware(tool_calls_per_reply={"echo": 2}, on_limit=on_limit))
    agent = Agent(ScriptedChatModel(tool_loving(seen)), kind=kind, tools=[echo], middlewares=[mw])
    events = await collect(agent.reply("go"))
    results = [(r.state, r.text) for m in agent.state.context for r in tool_results(m)]
    denied = "Permission denied: the limit of 2 calls per reply of echo is reached"
    assert results == [("success", "again"), ("success", "again"), ("denied", denied)]
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    final = agent.final_message
    assert final is not None
    if on_limit == "final_answer":
        assert [choice for choice, _ in seen] == ["auto", "auto", "auto", "none"]
        assert text_of(final) == "Final answer."
    else:
        assert len(seen) == 3
        assert (
            text_of(final) == "I stopped here: the limit of 2 calls per reply of echo is reached."
        )
    deny = [c.value for c in customs(events) if c.name == CALL_LIMIT_EVENT]
    assert deny == [{"limit": "tool_calls_per_reply", "max": 2, "action": "deny", "tool": "echo"}]


async def test_a_session_limit_on_every_tool(kind: MessageKind, attach: Attach) -> None:
    turns = [ScriptedTurn(tool_calls=[("echo", {"text": "a"}), ("echo", {"text": "b"})]), "ok"]
    mw = await attach(CallLimitMiddleware(tool_calls_per_session={"*": 3}))
    agent = Agent(ScriptedChatModel(turns, repeat=True), kind=kind, tools=[echo], middlewares=[mw])
    await collect(agent.reply("first"))
    await collect(agent.reply("second"))
    states = [r.state for m in agent.state.context for r in tool_results(m)]
    assert states == ["success", "success", "success", "denied"]


@tool
def flaky(text: str) -> str:
    """Fail every time (a tool whose run errors).

    Args:
        text: Ignored.
    """
    raise RuntimeError("flaky is down")


def once_per_reply(name: str) -> Any:
    """A model that calls `name` until a result comes back, then answers."""

    def script(messages: Sequence[Message], tools: Any, tool_choice: str) -> ScriptedTurn:
        if tool_results(messages[-1]) or tool_choice == "none":
            return ScriptedTurn(text="Done.")
        return ScriptedTurn(tool_calls=[(name, {"text": "x"})])

    return script


async def test_a_session_tool_limit_counts_failed_runs(kind: MessageKind, attach: Attach) -> None:
    """A call that ran and failed was still made: the session's next call is over the limit."""
    mw = await attach(CallLimitMiddleware(tool_calls_per_session={"flaky": 1}))
    model = ScriptedChatModel(once_per_reply("flaky"))
    agent = Agent(model, kind=kind, tools=[flaky], middlewares=[mw])
    await collect(agent.reply("first"))
    events = await collect(agent.reply("second"))
    states = [r.state for m in agent.state.context for r in tool_results(m)]
    assert states == ["error", "denied"]
    deny = [c.value for c in customs(events) if c.name == CALL_LIMIT_EVENT]
    assert deny == [
        {"limit": "tool_calls_per_session", "max": 1, "action": "deny", "tool": "flaky"}
    ]


async def test_a_session_tool_limit_does_not_count_denied_calls(
    kind: MessageKind, attach: Attach
) -> None:
    """A call denied (here by the reply limit) never ran: the next reply may still call."""
    mw = await attach(
        CallLimitMiddleware(tool_calls_per_reply={"echo": 1}, tool_calls_per_session={"echo": 2})
    )
    turns = [ScriptedTurn(tool_calls=[("echo", {"text": "a"}), ("echo", {"text": "b"})]), "ok"]
    agent = Agent(ScriptedChatModel(turns, repeat=True), kind=kind, tools=[echo], middlewares=[mw])
    await collect(agent.reply("first"))
    await collect(agent.reply("second"))
    states = [r.state for m in agent.state.context for r in tool_results(m)]
    assert states == ["success", "denied", "success", "denied"]


def test_limits_are_checked_when_built() -> None:
    with pytest.raises(ValueError, match="model_calls_per_reply must be an int >= 1"):
        CallLimitMiddleware(model_calls_per_reply=0)
    with pytest.raises(ValueError, match=r"tool_calls_per_reply\['x'\]"):
        CallLimitMiddleware(tool_calls_per_reply={"x": -1})
    with pytest.raises(ValueError, match="on_limit"):
        CallLimitMiddleware(on_limit="stop")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="must contain"):
        CallLimitMiddleware(end_message="bye")


# --- timeouts ----------------------------------------------------------------------------------


class Stuck:
    """Released by the test, never by time: a model call or tool run that hangs."""

    def __init__(self) -> None:
        self.never = asyncio.Event()
        self.started = 0
        self.cancelled = 0

    async def wait(self) -> None:
        """Hang until cancelled (and count the cancellation)."""
        try:
            await self.never.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise


@pytest.mark.parametrize("stream", [False, True])
async def test_a_model_call_that_takes_too_long_ends_with_model_timeout(
    kind: MessageKind, attach: Attach, stream: bool
) -> None:
    stuck = Stuck()

    class Hanging(ScriptedChatModel):
        async def __call__(self, messages: Any, **kw: Any) -> Any:
            stuck.started += 1
            if not stream:
                await stuck.wait()
            return self._hang()

        async def _hang(self) -> AsyncIterator[Any]:
            await stuck.wait()
            yield None

    mw = await attach(TimeoutMiddleware(model_timeout=0.05))
    agent = Agent(Hanging(["x"], model_name="slow"), kind=kind, middlewares=[mw])
    events = await collect(agent.reply("hi"))
    error = events[-1].error  # type: ignore[union-attr]
    assert "the model slow did not answer within 0.05 s" in error.message
    assert error.reason == "MODEL_TIMEOUT"
    assert (error.metadata["model"], error.metadata["timeoutSeconds"]) == ("slow", "0.05")
    assert stuck.started == 1
    assert stuck.cancelled == 1  # the agent's model call was stopped, not left running


async def test_a_timed_out_model_call_is_retried(kind: MessageKind) -> None:
    calls = 0

    class SlowOnce(ScriptedChatModel):
        async def __call__(self, messages: Any, **kw: Any) -> Any:
            nonlocal calls
            calls += 1
            if calls == 1:
                await asyncio.Event().wait()
            return await super().__call__(messages, **kw)

    retry = ModelRetryMiddleware(RetryPolicy(initial_delay=0, jitter=0))
    agent = Agent(
        SlowOnce(["hello"]),
        kind=kind,
        middlewares=[retry, TimeoutMiddleware(model_timeout=0.05)],
    )
    events = await collect(agent.reply("hi"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert calls == 2


async def test_a_tool_that_takes_too_long_gets_an_error_result(
    kind: MessageKind, attach: Attach
) -> None:
    stuck = Stuck()

    @tool
    async def slow(city: str) -> Any:
        """Never ends.

        Args:
            city: Where.
        """
        stuck.started += 1
        yield "partial "
        await stuck.wait()

    turns = [ScriptedTurn(tool_calls=[("slow", {"city": "Oslo"}), ("echo", {"text": "x"})]), "ok"]
    mw = await attach(TimeoutMiddleware(tool_timeout=30, tool_timeouts={"slow": 0.05}))
    agent = Agent(ScriptedChatModel(turns), kind=kind, tools=[slow, echo], middlewares=[mw])
    events = await collect(agent.reply("go"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    results = {r.name: (r.state, r.text) for m in agent.state.context for r in tool_results(m)}
    assert results == {
        "slow": (
            "error",
            "partial Error: ToolTimeoutError: tool slow did not finish within 0.05 s",
        ),
        "echo": ("success", "x"),
    }
    assert [e.type for e in events].count("tool_result_start") == 2
    assert stuck.cancelled == 1  # the tool run was stopped, not left running


def test_timeouts_are_checked_when_built() -> None:
    with pytest.raises(ValueError, match="model_timeout must be"):
        TimeoutMiddleware(model_timeout=0)
    with pytest.raises(ValueError, match=r"tool_timeouts\['x'\] must be"):
        TimeoutMiddleware(tool_timeouts={"x": -1})


async def test_a_sidecar_refuses_a_middleware_that_runs_in_process_only() -> None:
    from hookmesh.middleware import Middleware
    from hookmesh.remote import serve_middleware

    class Local(Middleware):
        local_only_reason = "it holds the agent's own file handles"

    with pytest.raises(ValueError, match="it holds the agent's own file handles"):
        await serve_middleware(Local())
