"""Guardrails in process and behind a sidecar, both kinds, streamed or not: each built-in trips
and passes, a trip keeps out of the session what tripped, a parallel input check cancels a
slow model call, a tool guardrail stops a call before the tool runs, and a failing check
follows its failure mode."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any, ClassVar

import pytest

from hookmesh.agent import FINAL_TOOL, Agent, AgentState, ReplyHandedOver, StepPoint, tool
from hookmesh.middleware import AgentView
from hookmesh.middleware.builtin.guardrails import (
    Guardrail,
    GuardrailSubject,
    JudgeGuardrail,
    LengthGuardrail,
    PatternGuardrail,
    ToolSchemaGuardrail,
    Verdict,
)
from hookmesh.models import ChatModel, ModelResult, ScriptedChatModel, ScriptedTurn
from hookmesh.schema import (
    AgentEvent,
    Message,
    MessageKind,
    ReplyEndEvent,
    is_assistant,
    text_of,
    tool_results,
)
from tests.agent_helpers import SHORT_TIMEOUT, collect
from tests.conftest import Attach

pytestmark = pytest.mark.timeout(60)

CALL = ScriptedTurn(tool_calls=[("lookup", {"city": "Oslo"})])


class Looked:
    """The calls the `lookup` tool ran."""

    cities: ClassVar[list[str]] = []


@tool
def lookup(city: str) -> str:
    """Look the weather up.

    Args:
        city: The city.
    """
    Looked.cities.append(city)
    return f"-3 C in {city}; the secret code is 1234"


@pytest.fixture(autouse=True)
def _no_lookups() -> None:
    Looked.cities = []


@pytest.fixture(params=[False, True], ids=["full", "streamed"])
def stream(request: pytest.FixtureRequest) -> bool:
    return request.param  # type: ignore[no-any-return]


def _end(events: list[AgentEvent]) -> ReplyEndEvent:
    end = events[-1]
    assert isinstance(end, ReplyEndEvent)
    return end


def _tripped(events: list[AgentEvent], guardrail: str, stage: str) -> ReplyEndEvent:
    end = _end(events)
    assert end.finish_reason == "error" and end.error is not None, end
    assert end.error.reason == "GUARDRAIL_TRIPPED"
    assert end.error.metadata["guardrail"] == guardrail
    assert end.error.metadata["stage"] == stage
    assert end.error.source == f"middleware:guardrail.{guardrail}"
    assert events[0].type == "reply_start"
    return end


async def _agent(
    attach: Attach, guardrail: Guardrail, turns: Sequence[Any], kind: MessageKind, stream: bool
) -> tuple[Agent, ScriptedChatModel]:
    model = ScriptedChatModel(list(turns), stream=stream)
    agent = Agent(model, kind=kind, tools=[lookup], middlewares=[await attach(guardrail)])
    return agent, model


# --- input --------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["blocking", "parallel"])
async def test_a_denied_input_never_reaches_the_model_or_the_session(
    kind: MessageKind, attach: Attach, stream: bool, mode: str
) -> None:
    guard = PatternGuardrail(deny=[r"\bpass(word)?\b"], mode=mode)  # type: ignore[arg-type]
    agent, model = await _agent(attach, guard, ["fine", "fine"], kind, stream)
    end = _tripped(await collect(agent.reply("my password is hunter2")), "pattern", "input")
    assert end.error is not None and "denied pattern" in end.error.message
    assert agent.state.context == []
    if mode == "blocking":
        assert model.calls == 0
    events = await collect(agent.reply("What is the weather?"))
    assert _end(events).finish_reason == "completed" and model.calls >= 1
    assert [text_of(m) for m in agent.state.context] == ["What is the weather?", "fine"]


async def test_an_allow_list_trips_what_it_does_not_name(
    kind: MessageKind, attach: Attach, stream: bool
) -> None:
    guard = PatternGuardrail(allow=["weather", "forecast"])
    agent, _ = await _agent(attach, guard, ["ok"], kind, stream)
    _tripped(await collect(agent.reply("Tell me a joke")), "pattern", "input")
    assert _end(await collect(agent.reply("Weather in Oslo?"))).finish_reason == "completed"


async def test_a_long_input_trips_the_length_guardrail(
    kind: MessageKind, attach: Attach, stream: bool
) -> None:
    agent, model = await _agent(attach, LengthGuardrail(max_chars=20), ["ok"], kind, stream)
    end = _tripped(await collect(agent.reply("x" * 21)), "length", "input")
    assert end.error is not None and "21 characters" in end.error.message
    assert model.calls == 0
    assert _end(await collect(agent.reply("x" * 20))).finish_reason == "completed"


# --- output -------------------------------------------------------------------------------


async def test_a_tripped_answer_is_not_kept_as_the_answer(
    kind: MessageKind, attach: Attach, stream: bool
) -> None:
    guard = LengthGuardrail(max_chars=12, stages=("output",))
    agent, _ = await _agent(attach, guard, ["a far too long answer", "short"], kind, stream)
    _tripped(await collect(agent.reply("Hi")), "length", "output")
    assert [text_of(m) for m in agent.state.context] == ["Hi"]
    assert _end(await collect(agent.reply("Again"))).finish_reason == "completed"
    assert [text_of(m) for m in agent.state.context] == ["Hi", "Again", "short"]


async def test_an_output_guardrail_sees_a_structured_answer_as_json(
    kind: MessageKind, attach: Attach
) -> None:
    guard = PatternGuardrail(deny=['"temp_c": -'], literal=True, stages=("output",))
    turn = ScriptedTurn(tool_calls=[(FINAL_TOOL, {"city": "Oslo", "temp_c": -3})])
    agent, _ = await _agent(attach, guard, [turn], kind, False)
    schema = {"type": "object", "properties": {"temp_c": {"type": "number"}}}
    end = _tripped(await collect(agent.reply("W?", output=schema)), "pattern", "output")
    assert end.output is None


# --- tools --------------------------------------------------------------------------------


async def test_a_tool_guardrail_stops_the_call_before_the_tool_runs(
    kind: MessageKind, attach: Attach, stream: bool
) -> None:
    guard = ToolSchemaGuardrail({"lookup": {"properties": {"city": {"enum": ["Bergen"]}}}})
    agent, model = await _agent(attach, guard, [CALL, "done"], kind, stream)
    end = _tripped(await collect(agent.reply("Weather?")), "tool_schema", "tool_arguments")
    assert end.error is not None and "lookup at $.city" in end.error.message
    assert end.error.metadata["tool"] == "lookup"
    assert Looked.cities == []  # never ran
    assert model.calls == 1
    (result,) = [r for m in agent.state.context for r in tool_results(m)]
    assert result.state == "denied" and result.text.startswith("Stopped: guardrail tool_schema")


async def test_a_tool_guardrail_passes_an_allowed_call(
    kind: MessageKind, attach: Attach, stream: bool
) -> None:
    guard = ToolSchemaGuardrail({"lookup": {"properties": {"city": {"enum": ["Oslo"]}}}})
    agent, _ = await _agent(attach, guard, [CALL, "done"], kind, stream)
    assert _end(await collect(agent.reply("Weather?"))).finish_reason == "completed"
    assert Looked.cities == ["Oslo"]


async def test_a_tripped_result_never_reaches_the_model(
    kind: MessageKind, attach: Attach, stream: bool
) -> None:
    guard = PatternGuardrail(deny=[r"secret code is \d+"], stages=("tool_result",))
    agent, model = await _agent(attach, guard, [CALL, "done"], kind, stream)
    events = await collect(agent.reply("Weather?"))
    _tripped(events, "pattern", "tool_result")
    assert Looked.cities == ["Oslo"] and model.calls == 1
    assert not [e for e in events if e.type == "tool_result_delta" and "1234" in e.text]
    (result,) = [r for m in agent.state.context for r in tool_results(m)]
    assert "1234" not in result.text


async def test_a_result_guardrail_passes_a_clean_result(
    kind: MessageKind, attach: Attach, stream: bool
) -> None:
    guard = PatternGuardrail(deny=["password"], stages=("tool_arguments", "tool_result"))
    agent, model = await _agent(attach, guard, [CALL, "done"], kind, stream)
    events = await collect(agent.reply("Weather?"))
    assert _end(events).finish_reason == "completed" and model.calls == 2
    deltas = [e.text for e in events if e.type == "tool_result_delta"]
    assert "".join(deltas) == "-3 C in Oslo; the secret code is 1234"


# --- the judge ----------------------------------------------------------------------------


def _judge_model(passes: bool, native: bool) -> ScriptedChatModel:
    verdict = {"passes": passes, "reason": "it gives medical advice" if not passes else "fine"}
    turn = (
        ScriptedTurn(text=json.dumps(verdict))
        if native
        else ScriptedTurn(tool_calls=[(FINAL_TOOL, verdict)])
    )
    return ScriptedChatModel([turn], repeat=True, native_output=native)


@pytest.mark.parametrize("native", [False, True], ids=["tool", "native"])
async def test_the_judge_trips_on_its_verdict(
    kind: MessageKind, attach: Attach, stream: bool, native: bool
) -> None:
    judge = _judge_model(False, native)
    guard = JudgeGuardrail(judge, "No medical advice.", stages=("output",))
    agent, _ = await _agent(attach, guard, ["Take two aspirin."], kind, stream)
    end = _tripped(await collect(agent.reply("My head hurts")), "judge", "output")
    assert end.error is not None and end.error.message.endswith("it gives medical advice")
    asked = text_of(judge.last_messages[-1])
    assert "No medical advice." in asked and "Take two aspirin." in asked


@pytest.mark.parametrize("native", [False, True], ids=["tool", "native"])
async def test_the_judge_passes_what_keeps_to_the_policy(
    kind: MessageKind, attach: Attach, native: bool
) -> None:
    guard = JudgeGuardrail(_judge_model(True, native), "No medical advice.", stages=("input",))
    agent, _ = await _agent(attach, guard, ["Sunny."], kind, False)
    assert _end(await collect(agent.reply("Weather?"))).finish_reason == "completed"


@pytest.mark.parametrize("mode", ["fail_closed", "fail_open"])
async def test_a_judge_that_fails_follows_its_failure_mode(
    kind: MessageKind, attach: Attach, mode: str
) -> None:
    broken = ScriptedChatModel([ScriptedTurn(error="the judge is down")])
    guard = JudgeGuardrail(broken, "Be kind.", stages=("input",), failure_mode=mode)  # type: ignore[arg-type]
    agent, _ = await _agent(attach, guard, ["Sure."], kind, False)
    end = _end(await collect(agent.reply("Hi")))
    if mode == "fail_open":
        assert end.finish_reason == "completed"
    else:
        assert end.error is not None and end.error.reason == "GUARDRAIL_FAILED"
        assert end.error.source == "middleware:guardrail.judge"


# --- parallel -----------------------------------------------------------------------------


class SlowModel(ChatModel):
    """A model call that waits until it is cancelled (and records that it was)."""

    model_name = "slow"

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.cancelled = False

    async def __call__(self, messages: Any, **unused: Any) -> ModelResult:
        self.entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        raise AssertionError("unreachable")


class AfterTheModelStarts(Guardrail):
    """A parallel input check that decides once the model call has begun."""

    default_name = "watcher"

    def __init__(self, started: asyncio.Event, trips: bool, **options: Any) -> None:
        super().__init__(mode="parallel", **options)
        self.started = started
        self.trips = trips

    async def check(self, agent: AgentView, subject: GuardrailSubject) -> Verdict:
        await self.started.wait()
        return f"{subject.text!r} is off limits" if self.trips else None


async def test_a_parallel_guardrail_cancels_a_slow_model_call(
    kind: MessageKind, attach: Attach
) -> None:
    model = SlowModel()
    guard = AfterTheModelStarts(model.entered, trips=True)
    agent = Agent(model, kind=kind, middlewares=[await attach(guard)])
    events = await collect(agent.reply("forbidden"), timeout=SHORT_TIMEOUT)
    end = _tripped(events, "watcher", "input")
    assert model.cancelled
    assert end.error is not None and "'forbidden' is off limits" in end.error.message
    assert [e.type for e in events[:2]] == ["reply_start", "model_call_start"]
    assert agent.state.context == []  # the input, sent to the model, is not kept


async def test_a_parallel_check_holds_the_first_response_until_it_decides(
    kind: MessageKind, attach: Attach, stream: bool
) -> None:
    answered = asyncio.Event()

    def script(messages: Any, tools: Any, tool_choice: str) -> ScriptedTurn:
        answered.set()  # the model has answered; the check decides only now
        return CALL

    model = ScriptedChatModel(script, stream=stream)
    guard = AfterTheModelStarts(answered, trips=True)
    agent = Agent(model, kind=kind, tools=[lookup], middlewares=[await attach(guard)])
    events = await collect(agent.reply("forbidden"))
    _tripped(events, "watcher", "input")
    assert Looked.cities == []  # the response's tool call never ran
    assert not [e for e in events if e.type == "model_call_end"]
    assert agent.state.context == []


async def test_a_passing_parallel_check_lets_the_reply_go_on(
    kind: MessageKind, attach: Attach, stream: bool
) -> None:
    answered = asyncio.Event()

    def script(messages: Sequence[Message], tools: Any, tool_choice: str) -> ScriptedTurn:
        answered.set()
        return CALL if not [m for m in messages if tool_results(m)] else ScriptedTurn("done")

    guard = AfterTheModelStarts(answered, trips=False)
    agent = Agent(
        ScriptedChatModel(script, stream=stream),
        kind=kind,
        tools=[lookup],
        middlewares=[await attach(guard)],
    )
    assert _end(await collect(agent.reply("fine"))).finish_reason == "completed"
    assert Looked.cities == ["Oslo"]
    assert text_of([m for m in agent.state.context if is_assistant(m)][-1]) == "done"


# --- trips and failures ----------------------------------------------------------------------


class Broken(Guardrail):
    """A check that fails (raises) instead of deciding."""

    default_name = "broken"

    def check(self, agent: AgentView, subject: GuardrailSubject) -> Verdict:
        raise RuntimeError("the check broke")


@pytest.mark.parametrize("mode", ["blocking", "parallel"])
@pytest.mark.parametrize("failure", ["fail_closed", "fail_open"])
async def test_a_failing_check_follows_its_failure_mode(
    kind: MessageKind, attach: Attach, mode: str, failure: str
) -> None:
    guard = Broken(mode=mode, failure_mode=failure)  # type: ignore[arg-type]
    agent, _ = await _agent(attach, guard, ["fine"], kind, False)
    end = _end(await collect(agent.reply("Hi")))
    if failure == "fail_open":
        assert end.finish_reason == "completed"
    else:
        assert end.error is not None and end.error.reason == "MIDDLEWARE_FAILED"
        assert end.error.source == "middleware:guardrail.broken"


async def test_a_fail_open_guardrail_still_trips(kind: MessageKind, attach: Attach) -> None:
    guard = PatternGuardrail(deny=["nope"], failure_mode="fail_open")
    agent, model = await _agent(attach, guard, ["fine"], kind, False)
    _tripped(await collect(agent.reply("nope")), "pattern", "input")
    assert model.calls == 0


def test_bad_patterns_and_options_are_refused() -> None:
    with pytest.raises(ValueError, match=r"invalid pattern '\(unclosed'"):
        PatternGuardrail(deny=["(unclosed"])
    with pytest.raises(ValueError, match="stages"):
        PatternGuardrail(deny=["x"], stages=("everywhere",))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"schemas\.lookup\.schema\.type"):
        ToolSchemaGuardrail({"lookup": {"type": "nope"}})
    with pytest.raises(ValueError, match="give"):
        LengthGuardrail()


async def test_a_parallel_check_cut_off_with_its_reply_runs_first_where_it_continues(
    kind: MessageKind,
) -> None:
    saved = ""
    first = Agent(
        ScriptedChatModel(["unused"]),
        kind=kind,
        middlewares=[AfterTheModelStarts(asyncio.Event(), trips=True)],
    )

    async def checkpoint(point: StepPoint) -> None:  # the replica dies at the first save
        nonlocal saved
        saved = first.checkpoint_state().model_dump_json()
        raise ReplyHandedOver

    with pytest.raises(ReplyHandedOver):
        await collect(first.reply("forbidden", checkpoint=checkpoint))
    state = AgentState.model_validate_json(saved)
    (pending,) = state.middle_context["guardrail.watcher"].values()
    assert pending["input"]["text"] == "forbidden"
    decided = asyncio.Event()
    decided.set()
    model = ScriptedChatModel(["answer"])
    second = Agent(
        model, kind=kind, state=state, middlewares=[AfterTheModelStarts(decided, trips=True)]
    )
    events = await collect(second.redrive())
    _tripped(events, "watcher", "input")
    assert model.calls == 0 and second.state.context == []
