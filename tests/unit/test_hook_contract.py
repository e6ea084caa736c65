"""What a hook may use and change, stated in types and checked the same in process and behind a
sidecar: the agent view, the overrides each `next_handler` takes, blame, and descriptions."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from hookmesh.agent import Agent, tool
from hookmesh.middleware import (
    OVERRIDES,
    ActingArgs,
    ActingNext,
    AgentView,
    HookSpec,
    Middleware,
    PermissionArgs,
    PermissionDecision,
    PermissionNext,
    ReasoningArgs,
    ReasoningNext,
    ReplyArgs,
    ReplyNext,
    blame,
)
from hookmesh.models import ScriptedChatModel, ScriptedTurn
from hookmesh.remote import MiddlewareServicer, SidecarAgent
from hookmesh.remote._codec import description_from_pb, description_to_pb
from hookmesh.remote._sidecar_agent import HostState
from hookmesh.schema import AgentEvent, MessageKind, make_user_text
from tests.agent_helpers import collect
from tests.conftest import Attach

pytestmark = pytest.mark.timeout(30)


@tool
def weather(city: str) -> str:
    """The weather.

    Args:
        city: A city.
    """
    return f"snow in {city}"


class PromptOverride(Middleware):
    """Tries to replace the prompt from on_reasoning, which only takes tool_choice."""

    async def on_reasoning(
        self, agent: AgentView, kwargs: ReasoningArgs, next_handler: ReasoningNext
    ) -> AsyncIterator[AgentEvent]:
        messages = [make_user_text(agent.kind, "sneaky")]
        async for event in next_handler(messages=messages):  # type: ignore[call-arg]
            yield event


class PermissionOverride(Middleware):
    """Tries to pass an override to on_check_permission's next_handler, which takes none."""

    async def on_check_permission(
        self, agent: AgentView, kwargs: PermissionArgs, next_handler: PermissionNext
    ) -> PermissionDecision:
        return await next_handler(tool_call=kwargs["tool_call"])  # type: ignore[call-arg]


class CityOverride(Middleware):
    """Runs every weather call for `city` instead."""

    def __init__(self, city: Any) -> None:
        self.city = city

    def on_acting(
        self, agent: AgentView, kwargs: ActingArgs, next_handler: ActingNext
    ) -> AsyncIterator[AgentEvent]:
        return next_handler(arguments={"city": self.city})


class CallRecorder(Middleware):
    """In process, inside the overriding middleware: what reached the layer below."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, Any]]] = []

    def on_acting(
        self, agent: AgentView, kwargs: ActingArgs, next_handler: ActingNext
    ) -> AsyncIterator[AgentEvent]:
        self.seen.append((kwargs["tool_call"].arguments, dict(kwargs["arguments"])))
        return next_handler()


def _agent(kind: MessageKind, middlewares: list[Middleware], turns: list[Any]) -> Agent:
    return Agent(ScriptedChatModel(turns), kind=kind, tools=[weather], middlewares=middlewares)


async def test_an_override_its_hook_does_not_take_fails_alike_in_process_and_remotely(
    kind: MessageKind, attach: Attach
) -> None:
    agent = _agent(kind, [await attach(PromptOverride())], ["hi"])
    end = (await collect(agent.reply("go")))[-1]
    assert end.type == "reply_end" and end.error is not None
    assert end.error.reason == "MIDDLEWARE_FAILED"
    assert end.error.source == "middleware:PromptOverride"
    assert "next_handler of on_reasoning cannot override messages (it takes: tool_choice)" in (
        end.error.message
    )


async def test_the_permission_next_handler_takes_no_overrides_on_either_side(
    kind: MessageKind, attach: Attach
) -> None:
    turns = [ScriptedTurn(tool_calls=[("weather", {"city": "Oslo"})]), "done"]
    agent = _agent(kind, [await attach(PermissionOverride())], turns)
    end = (await collect(agent.reply("go")))[-1]
    assert end.type == "reply_end" and end.error is not None
    assert end.error.source == "middleware:PermissionOverride"
    assert "on_check_permission cannot override tool_call (it takes: none)" in end.error.message


async def test_overridden_arguments_are_validated_and_recorded_in_the_call(
    kind: MessageKind, attach: Attach
) -> None:
    recorder = CallRecorder()
    turns = [ScriptedTurn(tool_calls=[("weather", {"city": "Oslo"})]), "done"]
    agent = _agent(kind, [await attach(CityOverride("Bergen")), recorder], turns)
    events = await collect(agent.reply("go"))
    deltas = [e.text for e in events if e.type == "tool_result_delta"]
    assert deltas == ["snow in Bergen"]
    assert recorder.seen == [(json.dumps({"city": "Bergen"}), {"city": "Bergen"})]
    bad = _agent(kind, [await attach(CityOverride(5))], turns)
    end = (await collect(bad.reply("go")))[-1]
    assert end.type == "reply_end" and end.error is not None
    assert end.error.source == "middleware:CityOverride"
    assert "invalid arguments for weather: city" in end.error.message


def test_the_override_table_names_what_each_hook_takes() -> None:
    assert OVERRIDES["on_reasoning"] == {"tool_choice"}
    assert OVERRIDES["on_model_call"] == {"model", "messages", "tools", "tool_choice"}
    assert OVERRIDES["on_acting"] == {"arguments"}
    for hook in ("on_reply", "on_check_permission", "on_compress_context"):
        assert OVERRIDES[hook] == frozenset()


class _Helper:
    """Not a middleware: the part a composed middleware hands its hook to."""

    async def run(self) -> AsyncIterator[AgentEvent]:
        raise RuntimeError("the helper broke")
        yield


class Composed(Middleware):
    """A middleware made of parts, which tags its parts' errors as its own."""

    def __init__(self) -> None:
        self.helper = _Helper()

    def on_reply(
        self, agent: AgentView, kwargs: ReplyArgs, next_handler: ReplyNext
    ) -> AsyncIterator[AgentEvent]:
        return self._guarded()

    async def _guarded(self) -> AsyncIterator[AgentEvent]:
        try:
            async for event in self.helper.run():
                yield event
        except Exception as exc:
            blame(exc, self)
            raise


class RaisesWhenCalled(Middleware):
    """A plain-function hook that raises before it returns a stream: its layer tags it."""

    def on_reasoning(
        self, agent: AgentView, kwargs: ReasoningArgs, next_handler: ReasoningNext
    ) -> AsyncIterator[AgentEvent]:
        return _raise_now()


def _raise_now() -> Any:
    raise ValueError("refused at once")


class Inner(Middleware):
    """Not in any chain: the part a composite middleware delegates its hook to."""

    def middleware_key(self) -> str:
        return "inner"

    def on_reasoning(
        self, agent: AgentView, kwargs: ReasoningArgs, next_handler: ReasoningNext
    ) -> AsyncIterator[AgentEvent]:
        raise ValueError("the inner part refused")


class Composite(Middleware):
    """Hands its hook to a middleware of its own; the error is the composite's (the chain's
    member), not the inner part's, whose key the reply would otherwise name."""

    def __init__(self) -> None:
        self.inner = Inner()

    def on_reasoning(
        self, agent: AgentView, kwargs: ReasoningArgs, next_handler: ReasoningNext
    ) -> AsyncIterator[AgentEvent]:
        return self.inner.on_reasoning(agent, kwargs, next_handler)


async def test_blame_names_a_composed_middleware_and_a_plain_hook_that_raises(
    kind: MessageKind,
) -> None:
    cases = (
        (Composed(), "the helper broke"),
        (RaisesWhenCalled(), "refused at once"),
        (Composite(), "the inner part refused"),
    )
    for mw, text in cases:
        end = (await collect(_agent(kind, [mw], ["hi"]).reply("go")))[-1]
        assert end.type == "reply_end" and end.error is not None
        assert end.error.source == f"middleware:{type(mw).__name__}", text
        assert text in end.error.message


class Exploding(Middleware):
    async def on_reasoning(
        self, agent: AgentView, kwargs: ReasoningArgs, next_handler: ReasoningNext
    ) -> AsyncIterator[AgentEvent]:
        raise RuntimeError("inner boom")
        yield


class Watching(Middleware):
    """A pass-through that sees every event of the reasoning step (a round trip each)."""

    async def on_reasoning(
        self, agent: AgentView, kwargs: ReasoningArgs, next_handler: ReasoningNext
    ) -> AsyncIterator[AgentEvent]:
        async for event in next_handler():
            yield event


async def test_a_downstream_error_through_a_sidecar_is_blamed_on_its_owner(
    kind: MessageKind, attach: Attach
) -> None:
    agent = _agent(kind, [await attach(Watching()), Exploding()], ["hi"])
    end = (await collect(agent.reply("go")))[-1]
    assert end.type == "reply_end" and end.error is not None
    assert end.error.source == "middleware:Exploding"


def test_the_agent_and_the_sidecar_agent_both_offer_the_agent_view() -> None:
    members = [n for n in dir(AgentView) if not n.startswith("_")]
    assert set(members) == {
        "emit",
        "kind",
        "model",
        "name",
        "output",
        "reply_id",
        "resolve_model",
        "session_id",
        "state",
        "tool",
        "user_id",
    }
    local = Agent(ScriptedChatModel(["hi"]), tools=[weather])
    remote = SidecarAgent("a", "flat", "r", "s", HostState([], {}))
    for view in (local, remote):
        assert all(hasattr(view, name) for name in members), type(view).__name__
    assert local.tool("weather") is weather and remote.tool("weather") is None
    assert local.model is not None and remote.model is None
    assert remote.resolve_model("fast").model_name == "fast"


class Tuned(Middleware):
    """Subscriptions set per instance."""

    def __init__(self, events: tuple[str, ...]) -> None:
        self.subscriptions = {"on_reasoning": events}
        self.read_only_subscriptions = {"on_reply": ("reply_end",)}
        self.hook_modes = {"on_reply": "pre_only"}
        self.failure_mode = "fail_open"

    def middleware_key(self) -> str:
        return "tuned"

    def on_reply(
        self, agent: AgentView, kwargs: ReplyArgs, next_handler: ReplyNext
    ) -> AsyncIterator[AgentEvent]:
        return next_handler()

    def on_reasoning(
        self, agent: AgentView, kwargs: ReasoningArgs, next_handler: ReasoningNext
    ) -> AsyncIterator[AgentEvent]:
        return next_handler()


def test_each_instance_describes_itself_and_the_host_sends_that_one_to_one() -> None:
    one, two = Tuned(("model_call_end",)), Tuned(("text_block_delta", "model_call_start"))
    described = one.describe()
    assert described.key == "tuned" and described.failure_mode == "fail_open"
    assert described.hooks == {
        "on_reply": HookSpec("pre_only", (), ("reply_end",)),
        "on_reasoning": HookSpec("intercept", ("model_call_end",), ()),
    }
    assert two.describe().hooks["on_reasoning"].subscriptions == (
        "text_block_delta",
        "model_call_start",
    )
    for mw in (one, two):
        host = MiddlewareServicer(mw)
        assert host.description == description_to_pb(mw.describe(), [], 0)
        assert description_from_pb(host.description) == mw.describe()


def test_a_bad_subscription_is_refused_naming_the_middleware_and_hook() -> None:
    with pytest.raises(ValueError, match="tuned: on_reasoning has no item 'reply_end'"):
        Tuned(("reply_end",)).describe()
