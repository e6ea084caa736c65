"""ShadowMiddleware with local middlewares: the candidate's events, results, state, context
edits, compressions and errors are compared with the live middleware's and never applied,
its downstream is the live one's (the model is called once, a stream is shared), and each
kind of disagreement is told."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any
from uuid import uuid4

import pytest

from hookmesh.agent import Agent
from hookmesh.middleware import Middleware
from hookmesh.models import ScriptedChatModel, ScriptedTurn
from hookmesh.remote import Disagreement, ShadowMiddleware
from hookmesh.schema import (
    AgentEvent,
    CustomEvent,
    MessageKind,
    ReplyEndEvent,
    TextBlockDeltaEvent,
    make_hint,
    text_of,
)
from tests.agent_helpers import collect, echo
from tests.middlewares import Denier, Exploder, Tagger
from tests.rollout_middlewares import V1, V2, Versioned

pytestmark = pytest.mark.timeout(30)

Seen = list[tuple[Disagreement | None, bool]]


class Hinter(Middleware):
    """Adds a hint before each reasoning step and, once the step ended, `after` to the
    last message's metadata: an edit before next and one after the downstream added the
    model's answer."""

    def __init__(self, before: str, after: str = "seen") -> None:
        self.before, self.after = before, after

    def middleware_key(self) -> str:
        return "hinter"

    async def on_reasoning(
        self, agent: Any, kwargs: Any, next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        agent.state.context.append(make_hint(agent.kind, self.before, "hinter", id="h1"))
        async for event in next_handler():
            yield event
        last = agent.state.context[-1]
        last.metadata = {**(last.metadata or {}), "hinter": self.after}


class Keeper(Middleware):
    """Compresses the context to its last `keep` messages after the inner compressors ran."""

    def __init__(self, keep: int) -> None:
        self.keep = keep

    def middleware_key(self) -> str:
        return "keeper"

    async def on_compress_context(self, agent: Any, kwargs: Any, next_handler: Any) -> None:
        await next_handler()
        agent.state.context[:] = agent.state.context[-self.keep :]


class StateProbe(Middleware):
    """Inside the shadow: reports the ``versioned`` slice as the model call starts."""

    async def on_model_call(self, agent: Any, kwargs: Any, next_handler: Any) -> Any:
        agent.emit(
            CustomEvent(
                reply_id=agent.reply_id,
                name="slice",
                value=dict(agent.state.middle_context["versioned"][agent.reply_id]),
            )
        )
        return await next_handler()


class Answers(Versioned):
    """Answers itself: never calls next."""

    version = "answers"

    async def on_reasoning(
        self, agent: Any, kwargs: Any, next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        yield CustomEvent(reply_id=agent.reply_id, name="version", value=self.version)


async def _run(
    live: Middleware, candidate: Middleware, model: ScriptedChatModel, *inner: Middleware
) -> tuple[list[AgentEvent], Seen]:
    events, seen, _ = await _run_agent(live, candidate, model, *inner)
    return events, seen


async def _run_agent(
    live: Middleware, candidate: Middleware, model: ScriptedChatModel, *inner: Middleware
) -> tuple[list[AgentEvent], Seen, Agent]:
    seen: Seen = []
    shadow = ShadowMiddleware(live, candidate, lambda s, d, e: seen.append((d, e)))
    agent = Agent(model, middlewares=[shadow, *inner])
    events = await collect(agent.reply("hi"))
    await shadow.settled()
    return events, seen, agent


def _customs(events: list[AgentEvent], name: str) -> list[Any]:
    return [e.value for e in events if isinstance(e, CustomEvent) and e.name == name]


def _kinds(seen: Seen) -> list[str]:
    return [d.kind if d is not None else "agree" for d, _ in seen]


async def test_the_candidate_sees_the_downstream_but_its_events_and_state_are_not_applied() -> None:
    model = ScriptedChatModel(["fine"])
    events, seen = await _run(V1(), V2(), model, StateProbe())
    assert _customs(events, "version") == ["v1"]
    assert _customs(events, "slice") == [{"by": "v1"}]  # v2's write went to its copy
    assert model.calls == 1
    [(found, failed)] = seen
    assert found is not None and (found.hook, found.kind, failed) == ("on_reasoning", "events", 0)
    assert '"v2"' in found.candidate and '"v2"' not in found.live


async def test_the_same_version_agrees_and_a_shared_stream_reaches_both() -> None:
    model = ScriptedChatModel(["a streamed answer"], stream=True, chunk_size=3)
    events, seen = await _run(Tagger("x"), Tagger("x"), model)
    assert model.calls == 1
    end = events[-1]
    assert isinstance(end, ReplyEndEvent) and end.finish_reason == "completed"
    assert sorted(_kinds(seen)) == ["agree", "agree"]  # on_reasoning and on_model_call


async def test_a_different_model_result_is_a_result_disagreement_not_applied() -> None:
    events, seen, agent = await _run_agent(Tagger("x"), Tagger("y"), ScriptedChatModel(["fine"]))
    assert text_of(agent.state.context[-1]) == "fine|x"  # the candidate got a copy
    assert sorted(_kinds(seen)) == ["events", "result"]
    [result] = [d for d, _ in seen if d is not None and d.kind == "result"]
    assert "fine|x" in result.live and "fine|y" in result.candidate
    assert _customs(events, "pre") == ["x"]


async def test_a_candidate_that_does_not_call_next_is_a_short_circuit() -> None:
    events, seen = await _run(V1(), Answers(), ScriptedChatModel(["fine"]))
    assert _customs(events, "version") == ["v1"]
    assert _kinds(seen) == ["short_circuit"]


async def test_a_failing_candidate_is_an_error_and_the_reply_goes_on() -> None:
    events, seen = await _run(V1(), Exploder("on_reasoning"), ScriptedChatModel(["fine"]))
    end = events[-1]
    assert isinstance(end, ReplyEndEvent) and end.finish_reason == "completed"
    [(found, failed)] = seen
    assert found is not None and found.kind == "error" and failed
    assert "boom in on_reasoning" in found.candidate


async def test_a_candidate_denying_a_tool_call_is_recorded_and_the_tool_still_runs() -> None:
    seen: Seen = []
    model = ScriptedChatModel([ScriptedTurn(tool_calls=[("echo", {"text": "hey"})]), "done"])
    shadow = ShadowMiddleware(Denier("other"), Denier("echo"), lambda s, d, e: seen.append((d, e)))
    agent = Agent(model, tools=[echo], middlewares=[shadow])
    events = await collect(agent.reply("go"))
    await shadow.settled()
    [result] = [e for e in events if e.type == "tool_result_end"]
    assert result.state == "success"  # type: ignore[attr-defined]
    [(found, failed)] = seen
    assert found is not None and (found.hook, found.kind, failed) == (
        "on_check_permission",
        "short_circuit",
        False,
    )
    assert found.live == '{"called_next": true}' and found.candidate == '{"called_next": false}'


async def test_the_same_context_edits_agree_and_only_the_live_ones_are_applied() -> None:
    _, seen, agent = await _run_agent(Hinter("x"), Hinter("x"), ScriptedChatModel(["ok"]))
    assert _kinds(seen) == ["agree"]  # the model's answer the downstream added is no edit
    hints = [m for m in agent.state.context if m.id == "h1"]
    assert len(hints) == 1  # the candidate's hint went to its copy
    assert agent.state.context[-1].metadata == {"hinter": "seen"}


async def test_a_different_edit_before_next_is_a_context_disagreement() -> None:
    _, seen, agent = await _run_agent(Hinter("x"), Hinter("y"), ScriptedChatModel(["ok"]))
    [(found, failed)] = seen
    assert found is not None and (found.hook, found.kind, failed) == ("on_reasoning", "context", 0)
    assert '"x"' in found.live and '"y"' in found.candidate
    assert found.live.startswith("[…,")  # the messages both sides kept are left out
    assert [text_of(m) for m in agent.state.context if m.id == "h1"] == ["x"]


async def test_a_different_edit_after_the_downstream_is_a_context_disagreement() -> None:
    _, seen, agent = await _run_agent(
        Hinter("x", after="a"), Hinter("x", after="b"), ScriptedChatModel(["ok"])
    )
    [(found, _)] = seen
    assert found is not None and found.kind == "context"
    assert '"a"' in found.live and '"b"' in found.candidate
    assert agent.state.context[-1].metadata == {"hinter": "a"}


async def _compress(live: Middleware, candidate: Middleware) -> tuple[Seen, Agent]:
    model = ScriptedChatModel(["one", "two"])
    seen: Seen = []
    shadow = ShadowMiddleware(live, candidate, lambda s, d, e: seen.append((d, e)))
    agent = Agent(model, middlewares=[shadow])
    await collect(agent.reply("first"))
    await collect(agent.reply("second"))
    await shadow.settled()
    return seen, agent


async def test_a_same_compression_agrees() -> None:
    seen, agent = await _compress(Keeper(2), Keeper(2))
    assert _kinds(seen) and set(_kinds(seen)) == {"agree"}
    assert [text_of(m) for m in agent.state.context][-2:] == ["second", "two"]


async def test_a_different_compression_is_compared_and_never_applied() -> None:
    seen, agent = await _compress(Keeper(3), Keeper(1))
    found = [d for d, _ in seen if d is not None]
    assert found and {(d.hook, d.kind) for d in found} == {("on_compress_context", "context")}
    assert [text_of(m) for m in agent.state.context] == ["first", "one", "second", "two"]


class PromptCounter(Middleware):
    """Counts the system prompts of a reply in its state slice."""

    def middleware_key(self) -> str:
        return "counter"

    async def on_system_prompt(self, agent: Any, prompt: str) -> str:
        state = self.state(agent)
        state["n"] = state.get("n", 0) + 1
        return prompt


async def test_the_candidates_state_starts_from_before_the_live_system_prompt() -> None:
    _, seen = await _run(PromptCounter(), PromptCounter(), ScriptedChatModel(["ok"]))
    assert _kinds(seen) == ["agree"]  # the candidate counted 1 too, not 2


class Scribbler(Middleware):
    """Rewrites in place every event and the kwargs it is handed: as a shadow candidate,
    what it scribbles on must be its own copies."""

    def middleware_key(self) -> str:
        return "scribbler"

    async def on_reasoning(
        self, agent: Any, kwargs: Any, next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        kwargs["tool_choice"] = "scribbled"
        async for event in next_handler():
            if isinstance(event, TextBlockDeltaEvent):
                event.delta = "scribbled"
            yield event

    async def on_model_call(self, agent: Any, kwargs: Any, next_handler: Any) -> Any:
        kwargs["messages"].clear()
        return await next_handler()


class KwargsKeeper(Tagger):
    """Tagger keeping the kwargs each hook was handed, to look at once the reply ended."""

    def __init__(self) -> None:
        super().__init__("x")
        self.kept: dict[str, Any] = {}

    async def on_reasoning(
        self, agent: Any, kwargs: Any, next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        self.kept["on_reasoning"] = kwargs
        async for event in super().on_reasoning(agent, kwargs, next_handler):
            yield event

    async def on_model_call(self, agent: Any, kwargs: Any, next_handler: Any) -> Any:
        self.kept["on_model_call"] = kwargs
        return await super().on_model_call(agent, kwargs, next_handler)


async def test_a_candidate_editing_events_and_kwargs_in_place_changes_nothing_live() -> None:
    model = ScriptedChatModel(["a streamed answer"], stream=True, chunk_size=3)
    live = KwargsKeeper()
    events, seen = await _run(live, Scribbler(), model)
    assert seen  # the candidate ran
    deltas = [e.delta for e in events if isinstance(e, TextBlockDeltaEvent)]
    assert deltas and "scribbled" not in deltas
    assert "".join(deltas).startswith("a streamed answer")
    assert live.kept["on_reasoning"]["tool_choice"] != "scribbled"
    assert live.kept["on_model_call"]["messages"]


class RandomHinter(Hinter):
    """Hinter whose hint takes a fresh random id each time (as make_hint callers may)."""

    async def on_reasoning(
        self, agent: Any, kwargs: Any, next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        agent.state.context.append(make_hint(agent.kind, self.before, "hinter", id=uuid4().hex))
        async for event in next_handler():
            yield event


class RandomAnswerIds(Middleware):
    """Gives the model's answer, and each of its blocks, a fresh random id."""

    def middleware_key(self) -> str:
        return "answer-ids"

    async def on_model_call(self, agent: Any, kwargs: Any, next_handler: Any) -> Any:
        result = await next_handler()
        result.message.id = uuid4().hex
        for block in getattr(result.message, "blocks", []):
            block.id = uuid4().hex
        return result


async def test_the_same_version_agrees_on_messages_with_random_ids(kind: MessageKind) -> None:
    seen: Seen = []
    shadow = ShadowMiddleware(
        RandomHinter("x"), RandomHinter("x"), lambda s, d, e: seen.append((d, e))
    )
    tagged = ShadowMiddleware(Tagger("x"), Tagger("x"), lambda s, d, e: seen.append((d, e)))
    answer = ShadowMiddleware(
        RandomAnswerIds(), RandomAnswerIds(), lambda s, d, e: seen.append((d, e))
    )
    agent = Agent(ScriptedChatModel(["ok"]), middlewares=[shadow, tagged, answer], kind=kind)
    await collect(agent.reply("hi"))
    for each in (shadow, tagged, answer):
        await each.settled()
    assert _kinds(seen) == ["agree"] * 4


class StepCounter(Middleware):
    """Counts the reasoning steps of a reply in its state slice and tells each count."""

    def middleware_key(self) -> str:
        return "steps"

    async def on_reasoning(
        self, agent: Any, kwargs: Any, next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        state = self.state(agent)
        state["n"] = state.get("n", 0) + 1
        yield CustomEvent(reply_id=agent.reply_id, name="step", value=state["n"])
        async for event in next_handler():
            yield event


class RenamedStepCounter(StepCounter):
    def middleware_key(self) -> str:
        return "steps-v2"


async def test_a_candidate_under_another_key_keeps_its_state_between_invocations() -> None:
    model = ScriptedChatModel([ScriptedTurn(tool_calls=[("echo", {"text": "hey"})]), "done"])
    seen: Seen = []
    shadow = ShadowMiddleware(
        StepCounter(), RenamedStepCounter(), lambda s, d, e: seen.append((d, e))
    )
    agent = Agent(model, tools=[echo], middlewares=[shadow])
    events = await collect(agent.reply("go"))
    await shadow.settled()
    assert _customs(events, "step") == [1, 2]
    assert _kinds(seen) == ["agree", "agree"]


class _Clock:
    """A perf_counter that moves only when told: the downstream's time, made explicit."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


class SlowModel(Middleware):
    """Inside the shadow: once the candidate waits for the downstream, the model call
    takes 100 s of the fake clock."""

    def __init__(self, clock: _Clock, waiting: asyncio.Event) -> None:
        self.clock, self.waiting = clock, waiting

    async def on_model_call(self, agent: Any, kwargs: Any, next_handler: Any) -> Any:
        await self.waiting.wait()
        self.clock.now += 100.0
        return await next_handler()


class Waiting(Tagger):
    """Tagger telling when it is about to call next (and so to wait for the downstream)."""

    def __init__(self, waiting: asyncio.Event) -> None:
        super().__init__("x")
        self.waiting = waiting

    async def on_reasoning(
        self, agent: Any, kwargs: Any, next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        self.waiting.set()
        async for event in super().on_reasoning(agent, kwargs, next_handler):
            yield event


async def test_the_candidates_latency_leaves_out_the_downstreams(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock, waiting = _Clock(), asyncio.Event()
    monkeypatch.setattr("hookmesh.remote._shadow.time", clock)
    took: list[float] = []
    shadow = ShadowMiddleware(Tagger("x"), Waiting(waiting), lambda s, d, e: took.append(s))
    agent = Agent(ScriptedChatModel(["ok"]), middlewares=[shadow, SlowModel(clock, waiting)])
    await collect(agent.reply("hi"))
    await shadow.settled()
    assert clock.now == 100.0 and len(took) == 2  # on_reasoning and on_model_call
    assert all(0.0 <= s < 100.0 for s in took)
