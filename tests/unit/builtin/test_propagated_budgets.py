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
    silent.settle(None)  # no report: everything reserved counts as used
    assert top.left == 2


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
