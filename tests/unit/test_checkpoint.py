"""Checkpoints: a reply saved at any step boundary continues in a fresh agent (`redrive`) to
the same end, runs no tool twice unless it is safe to, and says so when an outcome is
unknown. Both message kinds."""

from __future__ import annotations

from typing import Any

import pytest

from hookmesh.agent import (
    OUTCOME_UNKNOWN,
    Agent,
    AgentBusyError,
    AgentState,
    OutcomePolicy,
    ReplyHandedOver,
    Resume,
    StepPoint,
    tool,
)
from hookmesh.models import ScriptedChatModel, ScriptedTurn
from hookmesh.schema import AgentEvent, MessageKind, text_of, tool_results
from hookmesh.tools import ToolContext
from tests.agent_helpers import collect

pytestmark = pytest.mark.timeout(30)


class Effects:
    """Counts each tool's runs (its side effects)."""

    def __init__(self) -> None:
        self.runs: dict[str, int] = {}

    def tools(self) -> list[Any]:
        @tool
        def charge(amount: int) -> str:
            """Charge a card (not safe to run twice).

            Args:
                amount: In cents.
            """
            self.runs["charge"] = self.runs.get("charge", 0) + 1
            return f"charged {amount}"

        @tool(idempotent=True)
        def lookup(key: str) -> str:
            """Look a key up.

            Args:
                key: The key.
            """
            self.runs["lookup"] = self.runs.get("lookup", 0) + 1
            return f"value of {key}"

        return [charge, lookup]


def _turns() -> list[Any]:
    return [
        ScriptedTurn(tool_calls=[("lookup", {"key": "a"})]),
        ScriptedTurn(tool_calls=[("charge", {"amount": 5})]),
        "all done",
    ]


def _agent(
    kind: MessageKind, effects: Effects, state: AgentState | None = None, **kw: Any
) -> Agent:
    model = ScriptedChatModel(_turns() if state is None else _turns()[_model_calls(state) :])
    return Agent(model, kind=kind, tools=effects.tools(), state=state, **kw)


def _model_calls(state: AgentState) -> int:
    """How many model responses the saved state already holds (the scripted model resumes
    after them, as a real model would answer the same prompt)."""
    from hookmesh.schema import is_assistant

    return sum(1 for m in state.context if is_assistant(m))


async def _cut_at(
    kind: MessageKind, stop: int, keep: int | None = None
) -> tuple[list[StepPoint], str, Effects]:
    """Run a reply, saving its checkpoint at every point up to `keep` (default: `stop`), and
    stop it at point `stop`, as a replica that dies there: the points seen, the last state
    saved. With `keep` < `stop`, what ran in between happened but was never saved."""
    keep = stop if keep is None else keep
    effects = Effects()
    agent = _agent(kind, effects)
    points: list[StepPoint] = []
    saved = ""

    async def checkpoint(point: StepPoint) -> None:
        nonlocal saved
        points.append(point)
        if len(points) <= keep:
            saved = agent.checkpoint_state().model_dump_json()
        if len(points) == stop:
            raise ReplyHandedOver

    with pytest.raises(ReplyHandedOver):
        await collect(agent.reply("pay", checkpoint=checkpoint))
    return points, saved, effects


async def test_the_callback_sees_every_step_boundary_in_order(kind: MessageKind) -> None:
    effects = Effects()
    agent = _agent(kind, effects)
    points: list[StepPoint] = []

    async def checkpoint(point: StepPoint) -> None:
        points.append(point)
        AgentState.model_validate_json(agent.checkpoint_state().model_dump_json())

    events = await collect(agent.reply("pay", checkpoint=checkpoint))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert [p.kind for p in points] == [
        "input", "model", "tools", "results", "model", "tools", "results"
    ]  # fmt: skip
    assert [len(p.calls) for p in points if p.kind == "tools"] == [1, 1]
    assert agent.state.pending is None
    assert effects.runs == {"lookup": 1, "charge": 1}


@pytest.mark.parametrize("stop", [1, 2, 3, 4, 5, 7])
async def test_a_reply_cut_after_any_safe_point_ends_as_it_would_have(
    kind: MessageKind, stop: int
) -> None:
    """Stopped after a checkpoint where no unsafe call is half-done, the continued reply
    reaches the same final answer, running each tool exactly once in all."""
    _, saved, effects = await _cut_at(kind, stop)
    state = AgentState.model_validate_json(saved)
    assert state.pending is not None and state.pending.awaiting == "running"
    again = _agent(kind, effects, state)
    events = await collect(again.redrive())
    # Only a continuation from the inputs' checkpoint begins again: it was saved before the
    # cut-off reply's first event.
    assert ("reply_start" in [e.type for e in events]) == (stop == 1)
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert text_of(again.state.context[-1]) == "all done"
    assert again.state.pending is None
    assert effects.runs == {"lookup": 1, "charge": 1}


async def test_an_idempotent_call_cut_mid_run_runs_again(kind: MessageKind) -> None:
    points, saved, effects = await _cut_at(kind, 4, keep=3)  # lookup ran, no result saved
    assert [p.kind for p in points[2:]] == ["tools", "results"]
    assert effects.runs == {"lookup": 1}
    state = AgentState.model_validate_json(saved)
    assert state.pending is not None and len(state.pending.started_calls) == 1
    events = await collect(_agent(kind, effects, state).redrive())
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert effects.runs == {"lookup": 2, "charge": 1}


def _cut_charge(kind: MessageKind) -> Any:
    return _cut_at(kind, 7, keep=6)  # charge ran, its result never saved


async def test_an_unsafe_call_cut_mid_run_asks_the_user_saying_the_outcome_is_unknown(
    kind: MessageKind,
) -> None:
    points, saved, effects = await _cut_charge(kind)
    assert points[5].kind == "tools" and effects.runs["charge"] == 1
    agent = _agent(kind, effects, AgentState.model_validate_json(saved))
    events = await collect(agent.redrive())
    asked = [e for e in events if e.type == "require_user_confirm"]
    assert len(asked) == 1 and asked[0].reason == OUTCOME_UNKNOWN
    assert [c.name for c in asked[0].tool_calls] == ["charge"]
    assert events[-1].finish_reason == "awaiting_confirmation"  # type: ignore[union-attr]
    assert effects.runs["charge"] == 1
    from hookmesh.agent import Confirmation

    call_id = asked[0].tool_calls[0].id
    answer = Resume(confirmations=[Confirmation(call_id=call_id, confirmed=False)])
    done = await collect(agent.resume(answer))
    assert done[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert effects.runs["charge"] == 1


@pytest.mark.parametrize("policy", ["tell_model", "fail"])
async def test_the_other_policies_for_an_unknown_outcome(
    kind: MessageKind, policy: OutcomePolicy
) -> None:
    _, saved, effects = await _cut_charge(kind)
    agent = _agent(kind, effects, AgentState.model_validate_json(saved), outcome_unknown=policy)
    events: list[AgentEvent] = await collect(agent.redrive())
    end = events[-1]
    assert effects.runs["charge"] == 1
    if policy == "tell_model":
        assert end.finish_reason == "completed"  # type: ignore[union-attr]
        results = [r for m in agent.state.context for r in tool_results(m) if r.name == "charge"]
        assert [r.output[0].text for r in results] == [OUTCOME_UNKNOWN]  # type: ignore[union-attr]
        assert results[0].state == "error"
    else:
        assert end.finish_reason == "error"  # type: ignore[union-attr]
        assert end.error is not None and end.error.reason == "TOOL_OUTCOME_UNKNOWN"  # type: ignore[union-attr]


async def test_redrive_needs_a_reply_cut_off_while_running(kind: MessageKind) -> None:
    with pytest.raises(AgentBusyError, match="no reply cut off while running"):
        _agent(kind, Effects()).redrive()


async def test_a_call_keeps_its_idempotency_key_when_run_again_after_a_cut(
    kind: MessageKind,
) -> None:
    """The key a context tool gets is the same on the cut-off run and the run again, and
    differs between calls."""
    keys: list[str] = []

    @tool(idempotent=True)
    def pay(context: ToolContext[Any], amount: int) -> str:
        """Pay, exactly once per key.

        Args:
            amount: In cents.
        """
        keys.append(context.idempotency_key)
        return "paid"

    turns = [ScriptedTurn(tool_calls=[("pay", {"amount": 1})]), "done"]
    agent = Agent(ScriptedChatModel(turns), kind=kind, tools=[pay])
    saved = ""

    async def checkpoint(point: StepPoint) -> None:
        nonlocal saved
        if point.kind == "tools":
            saved = agent.checkpoint_state().model_dump_json()
        if point.kind == "results":
            raise ReplyHandedOver  # the run happened; its result was never saved

    with pytest.raises(ReplyHandedOver):
        await collect(agent.reply("pay", checkpoint=checkpoint))
    again = Agent(
        ScriptedChatModel(turns[1:]),
        kind=kind,
        tools=[pay],
        state=AgentState.model_validate_json(saved),
    )
    assert (await collect(again.redrive()))[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert len(keys) == 2 and keys[0] == keys[1]
    assert keys[0] == f"{again.reply_id}:call_1"
