"""PropagatedLimitMiddleware beyond tool calls: tokens and cost charged at every level stop a
handoff receiver at the top's remainder; the top's deadline cuts a receiver's tool; a limit a
caller sent nests with a configured one; the limits extension's codec."""

from __future__ import annotations

import asyncio

import pytest

from hookmesh.a2a import Limits, LimitsError, Spent, limits_json, limits_of, spent_of
from hookmesh.agent import Agent, tool
from hookmesh.middleware.builtin.handoff import Handoff, HandoffMiddleware
from hookmesh.middleware.builtin.propagated_limits import (
    SPENT_EVENT,
    Pool,
    PropagatedLimitMiddleware,
    RequestLimitMiddleware,
)
from hookmesh.models import ScriptedTurn
from hookmesh.schema import MessageKind, Usage
from tests.agent_helpers import collect
from tests.builtin_helpers import Recorded, results

pytestmark = pytest.mark.timeout(60)

TRANSFER = ScriptedTurn(tool_calls=[("transfer_to_worker", {"message": "Work."})])
USAGE = Usage(input_tokens=60, output_tokens=40)


@tool(read_only=True)
async def hold() -> str:
    """Wait for ever (until cut)."""
    await asyncio.Event().wait()
    return "let go"


@tool(read_only=True)
def note(n: int) -> str:
    """Note a number.

    Args:
        n: The number.
    """
    return f"noted {n}"


def _team(
    kind: MessageKind, parent: Recorded, worker: Recorded, limit: PropagatedLimitMiddleware
) -> Agent:
    handoff = Handoff("worker", worker.model, "Works.", tools=[hold], hand_back=True)
    return Agent(parent.model, kind=kind, middlewares=[limit, HandoffMiddleware([handoff])])


async def test_a_receiver_is_stopped_when_the_tokens_of_the_top_are_spent(
    kind: MessageKind,
) -> None:
    # Each model call reports 100 tokens: the parent's first call leaves 150, the worker's
    # first leaves 50, its second leaves none, its third is refused.
    worker = Recorded(
        [ScriptedTurn(tool_calls=[("missing", {})], usage=USAGE)] * 3 + ["unreachable"],
        usage=USAGE,
    )
    parent = Recorded(
        [ScriptedTurn(tool_calls=TRANSFER.tool_calls, usage=USAGE), "done"], usage=USAGE
    )
    agent = _team(kind, parent, worker, PropagatedLimitMiddleware(tokens=250))
    events = await collect(agent.reply("Go."))
    assert len(worker.prompts) == 2  # the third call never reached the model
    transfer = results(agent)["call_1"]
    assert transfer.state == "error"
    assert "the token limit of the top reply is spent (agent worker used" in transfer.text
    # The parent's own next call is refused too: the worker's tokens were charged to it.
    end = events[-1]
    assert end.finish_reason == "error" and end.error is not None  # type: ignore[union-attr]
    assert end.error.reason == "LIMIT_SPENT"  # type: ignore[union-attr]
    assert len(parent.prompts) == 1


async def test_cost_is_charged_at_the_configured_prices(kind: MessageKind) -> None:
    # 60 input tokens at 1000 USD/M and 40 output at 2500 USD/M: 0.16 USD a call.
    parent = Recorded(
        [ScriptedTurn(tool_calls=[("missing", {})], usage=USAGE)] * 3 + ["done"], usage=USAGE
    )
    limit = PropagatedLimitMiddleware(
        cost_usd=0.3, input_usd_per_mtok=1000, output_usd_per_mtok=2500
    )
    agent = Agent(parent.model, kind=kind, middlewares=[limit])
    events = await collect(agent.reply("Go."))
    assert len(parent.prompts) == 2
    end = events[-1]
    assert end.error is not None and end.error.reason == "LIMIT_SPENT"  # type: ignore[union-attr]
    assert end.error.metadata["limit"] == "costUsd"  # type: ignore[union-attr]


async def test_the_top_deadline_cuts_a_receivers_tool(kind: MessageKind) -> None:
    worker = Recorded([ScriptedTurn(tool_calls=[("hold", {})]), "unreachable"])
    parent = Recorded([TRANSFER, "after the worker"])
    agent = _team(kind, parent, worker, PropagatedLimitMiddleware(deadline_seconds=0.5))
    events = await collect(agent.reply("Go."), timeout=30)
    transfer = results(agent)["call_1"]
    assert "passed while agent worker ran" in transfer.text
    end = events[-1]
    assert end.error is not None and end.error.reason == "DEADLINE_EXCEEDED"  # type: ignore[union-attr]
    assert len(parent.prompts) == 1  # the parent's next step came after the deadline


async def test_a_configured_limit_nests_inside_the_one_a_caller_sent(kind: MessageKind) -> None:
    rec = Recorded([ScriptedTurn(tool_calls=[("note", {"n": i}) for i in range(4)]), "done"])
    sent = RequestLimitMiddleware(Limits(tool_calls=2))
    limits = [sent, PropagatedLimitMiddleware(10)]
    agent = Agent(rec.model, kind=kind, tools=[note], middlewares=limits)
    events = await collect(agent.reply("Go."))
    states = [results(agent)[f"call_{i}"].state for i in range(1, 5)]
    assert states.count("denied") == 2
    (report,) = [e for e in events if e.type == "custom" and e.name == SPENT_EVENT]
    assert report.value["toolCalls"] == 2  # type: ignore[union-attr]
    assert [e.type for e in events][-2:] == ["custom", "reply_end"]


def test_a_remote_childs_report_settles_its_reservation() -> None:
    top = Pool(10, 10, tokens=1000)
    child = top.reserve(None)
    assert top.left == 0 and child.remaining().tool_calls == 10
    child.settle(Spent(tool_calls=3, tokens=400, cost_usd=0.0))
    assert (top.left, top.tokens, top.spent().tool_calls) == (7, 600, 3)
    silent = top.reserve(5)
    silent.settle(None)  # no report: one call counts as used, the rest comes back
    assert top.left == 6


def test_the_extension_object_round_trips_and_bad_members_are_named() -> None:
    limits = Limits(tool_calls=3, tokens=900, cost_usd=0.25, deadline=1_800_000_000.5)
    raw = limits_json(limits)
    assert raw == {
        "toolCalls": 3,
        "tokens": 900,
        "costUsd": 0.25,
        "deadline": "2027-01-15T08:00:00.500Z",
    }
    assert limits_of(raw) == limits
    assert limits_of({}) == Limits()
    for bad, field in [
        ({"toolCalls": -1}, "toolCalls"),
        ({"tokens": 1.5}, "tokens"),
        ({"costUsd": "1"}, "costUsd"),
        ({"deadline": "2027-01-15T08:00:00"}, "deadline"),
        ({"deadline": "soon"}, "deadline"),
        ({"budget": 1}, "budget"),
    ]:
        with pytest.raises(LimitsError) as caught:
            limits_of(bad)
        assert caught.value.field == f"metadata.hookmeshLimits.{field}"
    assert spent_of({"toolCalls": 2, "tokens": 10, "costUsd": 0.5}) == Spent(2, 10, 0.5)
    assert spent_of({"toolCalls": -2}) is None and spent_of("x") is None


async def test_two_limits_on_one_reply_charge_its_tokens_once(kind: MessageKind) -> None:
    """A caller's limit in front of a configured one: each model call's 100 tokens count once
    at both levels, not once per layer."""
    rec = Recorded(
        [ScriptedTurn(tool_calls=[("note", {"n": 1})], usage=USAGE), "done"], usage=USAGE
    )
    sent = RequestLimitMiddleware(Limits(tokens=1000), prices=(1000.0, 0.0))
    limits = [sent, PropagatedLimitMiddleware(tokens=10_000, input_usd_per_mtok=1000)]
    agent = Agent(rec.model, kind=kind, tools=[note], middlewares=limits)
    events = await collect(agent.reply("Go."))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    (report,) = [e for e in events if e.type == "custom" and e.name == SPENT_EVENT]
    assert report.value["tokens"] == 200  # type: ignore[union-attr]
    assert report.value["costUsd"] == pytest.approx(0.12)  # type: ignore[union-attr]


def test_no_report_from_a_remote_agent_charges_one_call() -> None:
    top = Pool(10, 10)
    silent = top.reserve(5)
    assert top.left == 5
    silent.settle(None)  # a third-party agent: its one call counts, the rest comes back
    assert (top.left, top.spent().tool_calls) == (9, 1)
    empty = top.reserve(0)
    empty.settle(None)  # nothing reserved: nothing to charge
    assert (top.left, top.spent().tool_calls) == (9, 1)


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"toolCalls": float("nan")}, "toolCalls"),
        ({"toolCalls": float("inf")}, "toolCalls"),
        ({"tokens": float("-inf")}, "tokens"),
        ({"toolCalls": 3e9}, "toolCalls"),
        ({"toolCalls": 2**31}, "toolCalls"),
        ({"tokens": 2**63}, "tokens"),
        ({"costUsd": float("nan")}, "costUsd"),
    ],
)
def test_limits_out_of_range_or_not_finite_are_refused_with_their_field(
    raw: dict[str, float], field: str
) -> None:
    with pytest.raises(LimitsError) as caught:
        limits_of(raw)
    assert caught.value.field == f"metadata.hookmeshLimits.{field}"


def test_the_largest_limits_pass_and_a_malformed_report_is_no_report() -> None:
    assert limits_of({"toolCalls": 2**31 - 1, "tokens": 2**63 - 1}) == Limits(2**31 - 1, 2**63 - 1)
    for bad in (
        {"toolCalls": float("inf")},
        {"tokens": float("nan")},
        {"costUsd": float("inf")},
        {"toolCalls": 3e9},
        {"tokens": 2**63},
    ):
        assert spent_of(bad) is None


def test_a_final_task_carries_its_report_to_the_caller() -> None:
    """The remote agent's last word may be the whole task (not a status update): the report
    in the task's metadata is read all the same."""
    from a2a.types import a2a_pb2

    from hookmesh.a2a import SPENT_METADATA_KEY
    from hookmesh.middleware.builtin.remote_agent._a2a import (
        RemoteAgent,
        RemoteAgentConfig,
        TaskOutcome,
    )

    task = a2a_pb2.Task(
        id="t1",
        context_id="c1",
        status=a2a_pb2.TaskStatus(state=a2a_pb2.TaskState.TASK_STATE_COMPLETED),
    )
    task.metadata.update({SPENT_METADATA_KEY: {"toolCalls": 2, "tokens": 30, "costUsd": 0.5}})
    remote = RemoteAgent(RemoteAgentConfig(name="far", url="http://127.0.0.1:9"))
    outcome = TaskOutcome()
    remote._take(a2a_pb2.StreamResponse(task=task), outcome, {})
    assert outcome.state == "completed" and outcome.spent == Spent(2, 30, 0.5)
