"""PropagatedLimitMiddleware: a tool-call limit on the top reply bounds the handoff receivers
below it; a child reserves from the remainder, is stopped at it, and gives back the rest."""

from __future__ import annotations

import pytest

from hookmesh.a2a import Limits
from hookmesh.agent import Agent, tool
from hookmesh.middleware import Middleware
from hookmesh.middleware.builtin.handoff import Handoff, HandoffMiddleware
from hookmesh.middleware.builtin.propagated_limits import (
    Pool,
    PropagatedLimitMiddleware,
    RequestLimitMiddleware,
)
from hookmesh.models import ScriptedTurn
from hookmesh.schema import MessageKind, tool_results
from tests.agent_helpers import collect
from tests.builtin_helpers import Recorded, results

pytestmark = pytest.mark.timeout(60)

TRANSFER = ScriptedTurn(tool_calls=[("transfer_to_billing", {"message": "Check the orders."})])


@tool(read_only=True)
def lookup(order: str) -> str:
    """Look an order up.

    Args:
        order: The order number.
    """
    return f"order {order}: paid"


def _lookups(n: int) -> ScriptedTurn:
    return ScriptedTurn(tool_calls=[("lookup", {"order": str(i)}) for i in range(n)])


def _states(rec: Recorded, prompt: int) -> list[str]:
    """The states of the lookup results in one of the model's prompts (the last step's)."""
    found = [r for m in rec.prompts[prompt] for r in tool_results(m) if r.name == "lookup"]
    return [r.state for r in found]


def _agent(
    kind: MessageKind,
    parent: Recorded,
    worker: Recorded,
    tool_calls: int,
    per_child: int | None = None,
) -> Agent:
    billing = Handoff("billing", worker.model, "Orders.", tools=[lookup], hand_back=True)
    return Agent(
        parent.model,
        kind=kind,
        tools=[lookup],
        middlewares=[
            PropagatedLimitMiddleware(tool_calls, per_child=per_child),
            HandoffMiddleware([billing]),
        ],
    )


async def test_a_child_is_stopped_at_the_parents_remainder_and_the_parent_has_none_left(
    kind: MessageKind,
) -> None:
    parent = Recorded([TRANSFER, _lookups(1), "done"])
    worker = Recorded([_lookups(5), "checked"])
    agent = _agent(kind, parent, worker, tool_calls=4)
    await collect(agent.reply("Check my orders."))
    # the transfer took 1 of 4; the child reserved the 3 left and was stopped there
    assert _states(worker, 1) == ["success"] * 3 + ["denied"] * 2
    denied = [r for m in worker.prompts[1] for r in tool_results(m) if r.state == "denied"]
    assert "the tool-call limit of the top reply is spent (4 calls in all; this agent had 3)" in (
        denied[0].text
    )
    assert _states(parent, 2)[-1] == "denied"  # nothing came back: the child used it all
    assert "this agent had 4" in results(agent)["call_2"].text


async def test_a_child_gives_back_what_it_did_not_use(kind: MessageKind) -> None:
    parent = Recorded([TRANSFER, _lookups(3), "done"])
    worker = Recorded([_lookups(1), "checked"])
    agent = _agent(kind, parent, worker, tool_calls=4)
    await collect(agent.reply("Check my orders."))
    assert _states(worker, 1) == ["success"]
    # 4 - 1 (transfer) - 1 (the child's) = 2 left for the parent's three lookups
    assert _states(parent, 2) == ["success", "success", "denied"]


async def test_per_child_caps_what_one_child_reserves(kind: MessageKind) -> None:
    parent = Recorded([TRANSFER, _lookups(2), "done"])
    worker = Recorded([_lookups(3), "checked"])
    agent = _agent(kind, parent, worker, tool_calls=5, per_child=2)
    await collect(agent.reply("Check my orders."))
    assert _states(worker, 1) == ["success", "success", "denied"]
    assert _states(parent, 2) == ["success", "success"]  # 5 - 1 - 2 used = 2


def test_parallel_children_together_never_exceed_the_remainder() -> None:
    top = Pool(5, 5)
    children = [top.reserve(None), top.reserve(None)]
    assert [c.left for c in children] == [5, 0]
    capped = Pool(5, 5)
    kids = [capped.reserve(3), capped.reserve(3), capped.reserve(3)]
    assert [k.left for k in kids] == [3, 2, 0]
    spent = sum(1 for k in kids for _ in range(4) if k.take())
    assert spent == 5 and capped.left == 0
    kids[0].release()  # spent all three: gives nothing back
    assert capped.left == 0


def test_a_bad_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="tool_calls must be an int >= 0"):
        PropagatedLimitMiddleware(-1)
    with pytest.raises(ValueError, match="per_child must be an int >= 1 or None"):
        PropagatedLimitMiddleware(3, per_child=0)


async def test_a_grandchild_reserves_from_the_child_and_the_total_holds(kind: MessageKind) -> None:
    grandchild = Recorded([_lookups(5), "audited"])
    audit = Handoff("audit", grandchild.model, "Audits.", tools=[lookup], hand_back=True)
    to_audit = ScriptedTurn(tool_calls=[("transfer_to_audit", {"message": "Audit."})])
    worker = Recorded([to_audit, _lookups(1), "checked"])
    billing = Handoff(
        "billing",
        worker.model,
        "Orders.",
        tools=[lookup],
        middlewares=[HandoffMiddleware([audit])],
        hand_back=True,
    )
    parent = Recorded([TRANSFER, "done"])
    agent = Agent(
        parent.model,
        kind=kind,
        middlewares=[PropagatedLimitMiddleware(6), HandoffMiddleware([billing])],
    )
    await collect(agent.reply("Check my orders."))
    # 6: the parent's transfer 1, billing's transfer 1, the grandchild the 4 left
    assert _states(grandchild, 1) == ["success"] * 4 + ["denied"]
    assert _states(worker, 2)[-1] == "denied"  # nothing came back to billing


@tool(needs_confirmation=True)
def refund(order: str) -> str:
    """Refund an order (asks the user first).

    Args:
        order: The order number.
    """
    return f"order {order}: refunded"


async def test_a_resumed_reply_keeps_what_is_left_of_its_limits(kind: MessageKind) -> None:
    """Four calls: two lookups and the refund it pauses on take three; after the resume (on
    a new agent, from the saved state) one lookup is left, not four."""
    from hookmesh.agent import AgentState
    from hookmesh.schema import Confirmation, Resume

    def agent(model: Recorded) -> Agent:
        limit = PropagatedLimitMiddleware(4, tokens=10_000, deadline_seconds=600)
        return Agent(model.model, kind=kind, tools=[lookup, refund], middlewares=[limit])

    first = Recorded([_lookups(2), ScriptedTurn(tool_calls=[("refund", {"order": "7"})])])
    paused = agent(first)
    events = await collect(paused.reply("Refund order 7."))
    assert events[-1].finish_reason == "awaiting_confirmation"  # type: ignore[union-attr]
    (asked,) = [e for e in events if e.type == "require_user_confirm"]

    rest = Recorded([_lookups(2), "Done."])
    again = agent(rest)
    again.state = AgentState.model_validate_json(paused.state.model_dump_json())
    ok = Confirmation(call_id=asked.tool_calls[0].id, confirmed=True)  # type: ignore[union-attr]
    resumed = await collect(again.resume(Resume(confirmations=[ok])))
    assert resumed[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert _states(rest, 1)[-2:] == ["success", "denied"]
    (denied,) = [r for m in rest.prompts[1] for r in tool_results(m) if r.state == "denied"]
    assert "the tool-call limit of the top reply is spent (4 calls in all" in denied.text


@pytest.mark.parametrize(("again_limit", "allowed"), [(7, 2), (1, 1)])
async def test_a_resumed_child_counts_its_earlier_calls_once(
    kind: MessageKind, again_limit: int, allowed: int
) -> None:
    """Billing makes two lookups and pauses on a refund: with the transfer and the parent's
    confirm_billing call five of seven are spent. Resumed, billing gets what the parent has
    left (two; one when the limit was lowered to one meanwhile), not the three it had saved,
    and the report counts billing's earlier calls once."""
    from hookmesh.agent import AgentState
    from hookmesh.middleware.builtin.propagated_limits import SPENT_EVENT
    from hookmesh.schema import Confirmation, Resume

    def front(parent: Recorded, worker: Recorded, limit: int) -> Agent:
        billing = Handoff(
            "billing", worker.model, "Orders.", tools=[lookup, refund], hand_back=True
        )
        mw = PropagatedLimitMiddleware(limit, report=True)
        return Agent(parent.model, kind=kind, middlewares=[mw, HandoffMiddleware([billing])])

    first = Recorded([_lookups(2), ScriptedTurn(tool_calls=[("refund", {"order": "7"})])])
    paused = front(Recorded([TRANSFER]), first, 7)
    events = await collect(paused.reply("Refund order 7."))
    assert events[-1].finish_reason == "awaiting_confirmation"  # type: ignore[union-attr]
    (asked,) = [e for e in events if e.type == "require_user_confirm" and not e.source_path]
    (confirm,) = asked.tool_calls  # type: ignore[union-attr]

    worker = Recorded([_lookups(4), "Refunded."])
    again = front(Recorded(["Done."]), worker, again_limit)
    again.state = AgentState.model_validate_json(paused.state.model_dump_json())
    ok = Confirmation(call_id=confirm.id, confirmed=True)
    resumed = await collect(again.resume(Resume(confirmations=[ok])))
    assert resumed[-1].finish_reason == "completed"  # type: ignore[union-attr]
    # The last four lookups are the resumed step's (the first two came before the pause).
    assert _states(worker, 1)[2:] == ["success"] * allowed + ["denied"] * (4 - allowed)
    (report,) = [e for e in resumed if e.type == "custom" and e.name == SPENT_EVENT]
    assert report.value["toolCalls"] == 5 + allowed  # type: ignore[union-attr]


async def test_a_resumed_reply_under_a_callers_limits_reports_only_its_own_step(
    kind: MessageKind,
) -> None:
    """The caller was sent the paused step's report (three calls) and counted it: the resumed
    step goes on with the one call left and reports that one, not four."""
    from hookmesh.a2a import Limits
    from hookmesh.agent import AgentState
    from hookmesh.middleware.builtin.propagated_limits import SPENT_EVENT, RequestLimitMiddleware
    from hookmesh.schema import Confirmation, Resume

    def agent(model: Recorded) -> Agent:
        limit = RequestLimitMiddleware(Limits(tool_calls=4))
        return Agent(model.model, kind=kind, tools=[lookup, refund], middlewares=[limit])

    first = Recorded([_lookups(2), ScriptedTurn(tool_calls=[("refund", {"order": "7"})])])
    paused = agent(first)
    events = await collect(paused.reply("Refund order 7."))
    (report,) = [e for e in events if e.type == "custom" and e.name == SPENT_EVENT]
    assert report.value["toolCalls"] == 3  # type: ignore[union-attr]
    (asked,) = [e for e in events if e.type == "require_user_confirm"]

    rest = Recorded([_lookups(2), "Done."])
    again = agent(rest)
    again.state = AgentState.model_validate_json(paused.state.model_dump_json())
    ok = Confirmation(call_id=asked.tool_calls[0].id, confirmed=True)  # type: ignore[union-attr]
    resumed = await collect(again.resume(Resume(confirmations=[ok])))
    assert _states(rest, 1)[-2:] == ["success", "denied"]
    (report,) = [e for e in resumed if e.type == "custom" and e.name == SPENT_EVENT]
    assert report.value["toolCalls"] == 1  # type: ignore[union-attr]


async def test_a_resumed_reply_keeps_what_is_left_of_every_nested_limit(
    kind: MessageKind,
) -> None:
    """A caller's limit of ten encloses a configured one of four: two lookups and the refund
    it pauses on take three of the four. Resumed, the inner limit has one left (not four
    again), and the caller is told of that one call."""
    from hookmesh.a2a import Limits
    from hookmesh.agent import AgentState
    from hookmesh.middleware.builtin.propagated_limits import SPENT_EVENT, RequestLimitMiddleware
    from hookmesh.schema import Confirmation, Resume

    def agent(model: Recorded) -> Agent:
        limits = [RequestLimitMiddleware(Limits(tool_calls=10)), PropagatedLimitMiddleware(4)]
        return Agent(model.model, kind=kind, tools=[lookup, refund], middlewares=limits)

    first = Recorded([_lookups(2), ScriptedTurn(tool_calls=[("refund", {"order": "7"})])])
    paused = agent(first)
    events = await collect(paused.reply("Refund order 7."))
    assert events[-1].finish_reason == "awaiting_confirmation"  # type: ignore[union-attr]
    (asked,) = [e for e in events if e.type == "require_user_confirm"]

    rest = Recorded([_lookups(3), "Done."])
    again = agent(rest)
    again.state = AgentState.model_validate_json(paused.state.model_dump_json())
    ok = Confirmation(call_id=asked.tool_calls[0].id, confirmed=True)  # type: ignore[union-attr]
    resumed = await collect(again.resume(Resume(confirmations=[ok])))
    assert resumed[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert _states(rest, 1)[-3:] == ["success", "denied", "denied"]
    (denied, _) = [r for m in rest.prompts[1] for r in tool_results(m) if r.state == "denied"]
    assert "(10 calls in all; this agent had 4)" in denied.text
    (report,) = [e for e in resumed if e.type == "custom" and e.name == SPENT_EVENT]
    assert report.value["toolCalls"] == 1  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("before", "after"),
    [(None, RequestLimitMiddleware(Limits(tool_calls=100), fresh=True)), (Limits(10), None)],
    ids=["caller-limits-added-on-resume", "caller-limits-gone-on-resume"],
)
async def test_a_configured_limit_keeps_its_remainder_whatever_caller_limits_surround_it(
    kind: MessageKind, before: Limits | None, after: RequestLimitMiddleware | None
) -> None:
    """The configured limit of four has one left after the pause (two lookups and the
    refund). A resume that brings caller limits (a hundred calls) or loses them (a missing
    journal record) must not start it at four again, nor hand it the caller's remainder:
    one more lookup runs, the rest are denied."""
    from hookmesh.agent import AgentState
    from hookmesh.schema import Confirmation, Resume

    def agent(model: Recorded, caller: Middleware | None) -> Agent:
        limits = [*([] if caller is None else [caller]), PropagatedLimitMiddleware(4)]
        return Agent(model.model, kind=kind, tools=[lookup, refund], middlewares=limits)

    first = Recorded([_lookups(2), ScriptedTurn(tool_calls=[("refund", {"order": "7"})])])
    paused = agent(first, None if before is None else RequestLimitMiddleware(before))
    events = await collect(paused.reply("Refund order 7."))
    assert events[-1].finish_reason == "awaiting_confirmation"  # type: ignore[union-attr]
    (asked,) = [e for e in events if e.type == "require_user_confirm"]

    rest = Recorded([_lookups(4), "Done."])
    again = agent(rest, after)
    again.state = AgentState.model_validate_json(paused.state.model_dump_json())
    ok = Confirmation(call_id=asked.tool_calls[0].id, confirmed=True)  # type: ignore[union-attr]
    resumed = await collect(again.resume(Resume(confirmations=[ok])))
    assert resumed[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert _states(rest, 1)[-4:] == ["success", "denied", "denied", "denied"]


async def _cut_after_first_results(agent: Agent, prompt: str) -> str:
    """Run `agent`'s reply until the checkpoint after its first tool results, save the state
    there and stop, as a replica that dies right after saving: the saved state."""
    from hookmesh.agent import ReplyHandedOver, StepPoint

    saved = ""

    async def checkpoint(point: StepPoint) -> None:
        nonlocal saved
        saved = agent.checkpoint_state().model_dump_json()
        if point.kind == "results":
            raise ReplyHandedOver

    with pytest.raises(ReplyHandedOver):
        await collect(agent.reply(prompt, checkpoint=checkpoint))
    return saved


async def test_a_reply_continued_after_a_cut_keeps_what_is_left_of_its_limits(
    kind: MessageKind,
) -> None:
    """Four calls: the first step's two lookups ran and were saved before the replica died;
    the continued reply (another agent, from the saved state) has two left, not four."""
    from hookmesh.agent import AgentState

    def agent(model: Recorded) -> Agent:
        limit = PropagatedLimitMiddleware(4, tokens=10_000, deadline_seconds=600)
        return Agent(model.model, kind=kind, tools=[lookup], middlewares=[limit])

    first = Recorded([_lookups(2), _lookups(3), "Done."])
    saved = await _cut_after_first_results(agent(first), "Check the orders.")

    rest = Recorded([_lookups(3), "Done."])
    again = agent(rest)
    again.state = AgentState.model_validate_json(saved)
    events = await collect(again.redrive())
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert _states(rest, 1)[-3:] == ["success", "success", "denied"]


async def test_a_continued_reply_reports_to_its_caller_what_it_spent_before_the_cut(
    kind: MessageKind,
) -> None:
    """The caller was sent no report before the cut (a report comes with the reply's end), so
    the continued reply's report holds the calls of both runs: two and two (a third denied)."""
    from hookmesh.agent import AgentState
    from hookmesh.middleware.builtin.propagated_limits import SPENT_EVENT, RequestLimitMiddleware

    def agent(model: Recorded) -> Agent:
        limit = RequestLimitMiddleware(Limits(tool_calls=4))
        return Agent(model.model, kind=kind, tools=[lookup], middlewares=[limit])

    saved = await _cut_after_first_results(
        agent(Recorded([_lookups(2), _lookups(3), "Done."])), "Check the orders."
    )
    rest = Recorded([_lookups(3), "Done."])
    again = agent(rest)
    again.state = AgentState.model_validate_json(saved)
    events = await collect(again.redrive())
    assert _states(rest, 1)[-3:] == ["success", "success", "denied"]
    (report,) = [e for e in events if e.type == "custom" and e.name == SPENT_EVENT]
    assert report.value["toolCalls"] == 4  # type: ignore[union-attr]


async def test_a_continued_reply_keeps_what_is_left_of_a_limit_inside_a_callers(
    kind: MessageKind,
) -> None:
    """A configured limit of four inside a caller's of five: after the cut each goes on from
    what it had left (the configured one's calls given back to the caller's as at a pause),
    so the configured limit still allows two more, and the caller's report counts four."""
    from hookmesh.agent import AgentState
    from hookmesh.middleware.builtin.propagated_limits import SPENT_EVENT, RequestLimitMiddleware

    def agent(model: Recorded) -> Agent:
        limits = [RequestLimitMiddleware(Limits(tool_calls=5)), PropagatedLimitMiddleware(4)]
        return Agent(model.model, kind=kind, tools=[lookup], middlewares=limits)

    saved = await _cut_after_first_results(
        agent(Recorded([_lookups(2), _lookups(3), "Done."])), "Check the orders."
    )
    rest = Recorded([_lookups(3), "Done."])
    again = agent(rest)
    again.state = AgentState.model_validate_json(saved)
    events = await collect(again.redrive())
    assert _states(rest, 1)[-3:] == ["success", "success", "denied"]
    (report,) = [e for e in events if e.type == "custom" and e.name == SPENT_EVENT]
    assert report.value["toolCalls"] == 4  # type: ignore[union-attr]


async def test_a_new_reply_after_a_cut_one_was_given_up_gets_its_full_limits(
    kind: MessageKind,
) -> None:
    """The cut-off reply's remainder is for its own continuation only: with that reply given
    up (its position cleared) the next reply of the session starts with all four calls."""
    from hookmesh.agent import AgentState

    def agent(model: Recorded) -> Agent:
        limit = PropagatedLimitMiddleware(4)
        return Agent(model.model, kind=kind, tools=[lookup], middlewares=[limit])

    saved = await _cut_after_first_results(
        agent(Recorded([_lookups(2), _lookups(3), "Done."])), "Check the orders."
    )
    rest = Recorded([_lookups(5), "Done."])
    again = agent(rest)
    again.state = AgentState.model_validate_json(saved)
    again.state.pending = None
    events = await collect(again.reply("And the other orders?"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert _states(rest, 1)[-5:] == ["success"] * 4 + ["denied"]


async def test_the_time_a_reply_was_cut_off_counts_toward_its_deadline(
    kind: MessageKind, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unlike a pause (waiting for the user), a cut is the reply running late: continued 700 s
    later, a reply with a 600 s deadline ends at once with DEADLINE_EXCEEDED."""
    import time

    from hookmesh.agent import AgentState
    from hookmesh.middleware.builtin import propagated_limits

    def agent(model: Recorded) -> Agent:
        limit = PropagatedLimitMiddleware(deadline_seconds=600)
        return Agent(model.model, kind=kind, tools=[lookup], middlewares=[limit])

    saved = await _cut_after_first_results(
        agent(Recorded([_lookups(2), "Done."])), "Check the orders."
    )
    later = time.time() + 700
    monkeypatch.setattr(propagated_limits.time, "time", lambda: later)
    again = agent(Recorded(["Done."]))
    again.state = AgentState.model_validate_json(saved)
    end = (await collect(again.redrive()))[-1]
    assert end.error is not None and end.error.reason == "DEADLINE_EXCEEDED"  # type: ignore[union-attr]
