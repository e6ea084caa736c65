"""HandoffMiddleware: the receiver takes over the reply (or hands back), sees the history its
filter lets through, and the events and the session say who is speaking."""

from __future__ import annotations

from typing import Any

import pytest

from hookmesh.agent import Agent, tool
from hookmesh.middleware.builtin.handoff import (
    HANDOFF_METADATA_KEY,
    SUMMARY_INSTRUCTION,
    SUMMARY_PREFIX,
    Handoff,
    HandoffMiddleware,
    InputFilter,
)
from hookmesh.models import ScriptedChatModel, ScriptedTurn
from hookmesh.schema import Message, MessageKind, ToolResult, is_system, text_of, tool_results
from tests.agent_helpers import collect
from tests.builtin_helpers import Recorded, own, results

pytestmark = pytest.mark.timeout(60)

TRANSFER = ScriptedTurn(tool_calls=[("transfer_to_billing", {"message": "Refund order 7."})])


@tool(read_only=True)
def lookup(order: str) -> str:
    """Look an order up.

    Args:
        order: The order number.
    """
    return f"order {order}: paid twice"


def _seen(rec: Recorded, call: int = 0) -> list[tuple[str, str]]:
    """The (role, text) of the non-system messages of one of the model's prompts."""
    return [(m.role, text_of(m)) for m in rec.prompts[call] if not is_system(m)]


def results_in(messages: list[Message]) -> list[ToolResult]:
    return [r for m in messages for r in tool_results(m)]


async def _two_replies(
    kind: MessageKind, billing: Handoff, parent: Recorded
) -> tuple[Agent, list[Any]]:
    """A first reply the parent answers itself, then one it hands off."""
    agent = Agent(parent.model, kind=kind, name="front", middlewares=[HandoffMiddleware([billing])])
    await collect(agent.reply("Hi, I am Ada."))
    return agent, await collect(agent.reply("I was charged twice for order 7."))


@pytest.mark.parametrize(
    ("input_filter", "last_n", "expected"),
    [
        (
            "all",
            4,
            [
                ("user", "Hi, I am Ada."),
                ("assistant", "Hello Ada."),
                ("user", "I was charged twice for order 7."),
                ("user", "Refund order 7."),
            ],
        ),
        (
            "last",
            2,
            [
                ("assistant", "Hello Ada."),
                ("user", "I was charged twice for order 7."),
                ("user", "Refund order 7."),
            ],
        ),
        ("none", 4, [("user", "Refund order 7.")]),
    ],
)
async def test_the_receiver_sees_what_its_filter_lets_through_and_answers_the_reply(
    kind: MessageKind, input_filter: InputFilter, last_n: int, expected: list[tuple[str, str]]
) -> None:
    parent = Recorded(["Hello Ada.", TRANSFER, "the parent must not speak again"])
    worker = Recorded(["Refunded order 7."])
    billing = Handoff("billing", worker.model, "Refunds.", input_filter=input_filter, last_n=last_n)
    agent, events = await _two_replies(kind, billing, parent)
    assert _seen(worker) == expected
    assert len(parent.prompts) == 2  # the first reply, then the step that handed off
    final = agent.final_message
    assert final is not None and text_of(final) == "Refunded order 7."
    assert final.name == "billing"
    assert (final.metadata or {})[HANDOFF_METADATA_KEY] == {"agent": "billing", "call_id": "call_1"}
    assert agent.state.context[-1] is final  # the session's last word is the receiver's
    assert own(events)[-1].type == "reply_end"
    assert own(events)[-1].finish_reason == "completed"  # type: ignore[union-attr]
    nested = [e for e in events if e.source_path]
    assert nested and all(e.source_path[0].agent_name == "billing" for e in nested)  # type: ignore[index]
    assert {e.source_path[0].call_id for e in nested} == {"call_1"}  # type: ignore[index]
    deltas = [e for e in nested if e.type == "text_block_delta"]
    assert "".join(e.delta for e in deltas) == "Refunded order 7."  # type: ignore[union-attr]


async def test_the_summary_filter_hands_over_one_message_the_summary_model_wrote(
    kind: MessageKind,
) -> None:
    parent = Recorded(["Hello Ada.", TRANSFER])
    worker = Recorded(["Refunded order 7."])
    summariser = Recorded(["Ada was charged twice for order 7."])
    billing = Handoff(
        "billing", worker.model, "Refunds.", input_filter="summary", summary_model=summariser.model
    )
    agent, _ = await _two_replies(kind, billing, parent)
    assert _seen(worker) == [
        ("user", SUMMARY_PREFIX + "Ada was charged twice for order 7."),
        ("user", "Refund order 7."),
    ]
    assert text_of(summariser.prompts[0][0]) == SUMMARY_INSTRUCTION
    assert text_of(summariser.prompts[0][1]) == (
        "[user] Hi, I am Ada.\n[assistant] Hello Ada.\n[user] I was charged twice for order 7."
    )
    assert agent.final_message is not None and agent.final_message.name == "billing"


async def test_the_summary_filter_without_a_summary_model_asks_the_parents_model(
    kind: MessageKind,
) -> None:
    parent = Recorded(["Hello Ada.", TRANSFER, "Ada wants a refund."])
    worker = Recorded(["Refunded order 7."])
    billing = Handoff("billing", worker.model, "Refunds.", input_filter="summary")
    await _two_replies(kind, billing, parent)
    assert text_of(parent.prompts[2][0]) == SUMMARY_INSTRUCTION
    assert _seen(worker)[0] == ("user", SUMMARY_PREFIX + "Ada wants a refund.")


async def test_last_n_drops_a_tool_result_whose_call_was_cut_off(kind: MessageKind) -> None:
    parent = Recorded([ScriptedTurn(tool_calls=[("lookup", {"order": "7"})]), TRANSFER])
    worker = Recorded(["Refunded."])
    billing = Handoff("billing", worker.model, "Refunds.", input_filter="last", last_n=1)
    agent = Agent(
        parent.model, kind=kind, tools=[lookup], middlewares=[HandoffMiddleware([billing])]
    )
    await collect(agent.reply("Refund order 7."))
    assert _seen(worker) == [("user", "Refund order 7.")]


async def test_last_n_keeps_a_call_with_its_result(kind: MessageKind) -> None:
    parent = Recorded([ScriptedTurn(tool_calls=[("lookup", {"order": "7"})]), TRANSFER])
    worker = Recorded(["Refunded."])
    billing = Handoff("billing", worker.model, "Refunds.", input_filter="last", last_n=2)
    agent = Agent(
        parent.model, kind=kind, tools=[lookup], middlewares=[HandoffMiddleware([billing])]
    )
    await collect(agent.reply("Refund order 7."))
    seen = worker.prompts[0]
    assert [r.text for r in results_in(seen)] == ["order 7: paid twice"]
    assert text_of(seen[-1]) == "Refund order 7."


async def test_hand_back_returns_the_answer_to_the_parent_which_goes_on(
    kind: MessageKind,
) -> None:
    parent = Recorded([TRANSFER, "Billing says: refunded. Anything else?"])
    worker = Recorded(["Refunded order 7."])
    billing = Handoff("billing", worker.model, "Refunds.", hand_back=True)
    mw = HandoffMiddleware([billing])
    agent = Agent(parent.model, kind=kind, name="front", middlewares=[mw])
    events = await collect(agent.reply("I was charged twice."))
    assert not mw.list_tools()[0].return_directly
    assert "hands back to you" in mw.list_tools()[0].description
    assert len(parent.prompts) == 2
    assert results(agent)["call_1"].text == "Refunded order 7."
    final = agent.final_message
    assert final is not None and text_of(final) == "Billing says: refunded. Anything else?"
    assert final.name != "billing" and HANDOFF_METADATA_KEY not in (final.metadata or {})
    assert any(e.source_path and e.source_path[0].agent_name == "billing" for e in events)


async def test_a_receiver_that_fails_answers_the_call_with_an_error_and_the_parent_goes_on(
    kind: MessageKind,
) -> None:
    parent = Recorded([TRANSFER, "Sorry, billing is down."])
    broken = ScriptedChatModel([ScriptedTurn(error="billing model is down")])
    agent = Agent(
        parent.model,
        kind=kind,
        middlewares=[HandoffMiddleware([Handoff("billing", broken, "Refunds.")])],
    )
    await collect(agent.reply("Refund please."))
    result = results(agent)["call_1"]
    assert result.state == "error"
    assert "the sub-agent billing ended with error" in result.text
    assert agent.final_message is not None
    assert text_of(agent.final_message) == "Sorry, billing is down."
    assert agent.final_message.name != "billing"


async def test_the_receiver_runs_its_own_tools_nested_under_the_handoff(kind: MessageKind) -> None:
    parent = Recorded([TRANSFER])
    worker = Recorded([ScriptedTurn(tool_calls=[("lookup", {"order": "7"})]), "Paid twice."])
    billing = Handoff("billing", worker.model, "Refunds.", tools=[lookup])
    agent = Agent(parent.model, kind=kind, middlewares=[HandoffMiddleware([billing])])
    events = await collect(agent.reply("Refund order 7."))
    assert parent.tools[0] == ["transfer_to_billing"]  # the parent does not get its tools
    assert worker.tools[0] == ["lookup"]
    ends = [e for e in events if e.type == "tool_result_end" and e.source_path]
    assert [e.source_path[0].agent_name for e in ends] == ["billing"]  # type: ignore[index]
    assert agent.final_message is not None and text_of(agent.final_message) == "Paid twice."


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "Billing Team"}, "must match"),
        ({"input_filter": "recent"}, "input_filter must be one of all, last, summary, none"),
        ({"last_n": 0}, "last_n"),
    ],
)
def test_a_bad_handoff_is_refused(kwargs: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {"name": "billing", "description": "d", **kwargs}
    with pytest.raises(ValueError, match=message):
        Handoff(model=ScriptedChatModel(["x"]), **args)


def test_handoff_names_must_be_distinct_and_present() -> None:
    model = ScriptedChatModel(["x"])
    with pytest.raises(ValueError, match="distinct"):
        HandoffMiddleware([Handoff("a", model, "d"), Handoff("a", model, "e")])
    with pytest.raises(ValueError, match="at least one"):
        HandoffMiddleware([])


@tool(needs_confirmation=True)
def refund(order: str) -> str:
    """Refund an order (asks the user first).

    Args:
        order: The order number.
    """
    return f"order {order}: refunded"


@pytest.mark.parametrize("hand_back", [False, True])
async def test_a_receivers_ask_pauses_the_reply_and_its_answer_comes_after_approval(
    kind: MessageKind, hand_back: bool
) -> None:
    from hookmesh.agent import AgentState
    from hookmesh.schema import Confirmation, Resume

    def front(parent: Recorded, worker: Recorded) -> Agent:
        billing = Handoff("billing", worker.model, "Refunds.", tools=[refund], hand_back=hand_back)
        return Agent(parent.model, kind=kind, middlewares=[HandoffMiddleware([billing])])

    worker = Recorded([ScriptedTurn(tool_calls=[("refund", {"order": "7"})])])
    agent = front(Recorded([TRANSFER]), worker)
    events = await collect(agent.reply("Refund order 7, please."))
    assert events[-1].finish_reason == "awaiting_confirmation"  # type: ignore[union-attr]
    (asked,) = own([e for e in events if e.type == "require_user_confirm"])
    (confirm,) = asked.tool_calls  # type: ignore[union-attr]
    assert confirm.name == "confirm_billing"
    assert '"path": ["billing"]' in confirm.arguments and "refund" in confirm.arguments
    (deep,) = [e for e in events if e.type == "require_user_confirm" and e.source_path]
    assert [s.agent_name for s in deep.source_path] == ["billing"]  # type: ignore[union-attr]

    parent = Recorded(["The refund is done."])
    again = front(parent, Recorded(["Refunded order 7."]))
    again.state = AgentState.model_validate_json(agent.state.model_dump_json())
    resumed = await collect(
        again.resume(Resume(confirmations=[Confirmation(call_id=confirm.id, confirmed=True)]))
    )
    assert resumed[-1].finish_reason == "completed"  # type: ignore[union-attr]
    ran = [e for e in resumed if e.type == "tool_result_end" and e.source_path]
    assert [e.state for e in ran] == ["success"]  # type: ignore[union-attr]
    assert results(again)[confirm.id].text == "Refunded order 7."
    final = again.final_message
    assert final is not None
    if hand_back:
        assert text_of(final) == "The refund is done." and "confirm_billing" not in parent.tools[0]
    else:
        assert text_of(final) == "Refunded order 7." and parent.prompts == []
        assert final.name == "billing"


def test_with_no_receiver_waiting_the_tool_results_are_not_read() -> None:
    """`_rejected` runs before every model call: with nothing confirming it must not walk the
    whole context (here, walking it fails)."""
    from collections.abc import Iterator

    from hookmesh.middleware.builtin.handoff import _rejected

    class Unread(list[Any]):
        def __iter__(self) -> Iterator[Any]:
            raise AssertionError("the context was read with no receiver waiting")

    assert _rejected({}, Unread()) == []
