"""Budget control and tool-call patching: flat, agentic, in process and via a sidecar."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from hookmesh.agent import Agent
from hookmesh.middleware.builtin.budget import DEFAULT_HINT, BudgetMiddleware
from hookmesh.middleware.builtin.patch_tool_calls import PatchToolCallsMiddleware
from hookmesh.models import ScriptedChatModel, ScriptedTurn
from hookmesh.schema import (
    AgenticMessage,
    Message,
    MessageKind,
    TextBlock,
    ToolCall,
    ToolResultBlock,
    Usage,
    is_hint,
    make_assistant,
    make_user_text,
    text_of,
    to_kind,
    tool_results,
    unanswered_tool_calls,
)
from tests.agent_helpers import collect, echo, types
from tests.conftest import Attach

pytestmark = pytest.mark.timeout(60)


def forever_calling_tools(seen: list[tuple[str, list[Message]]]) -> Any:
    """A model that calls a tool whenever it may, and answers only when it may not."""

    def script(messages: Sequence[Message], tools: Any, tool_choice: str) -> ScriptedTurn:
        seen.append((tool_choice, list(messages)))
        usage = Usage(input_tokens=100, output_tokens=20)
        if tool_choice == "none":
            return ScriptedTurn(text="Final answer: the budget ran out.", usage=usage)
        return ScriptedTurn(tool_calls=[("echo", {"text": "again"})], usage=usage)

    return script


async def test_budget_ends_an_endless_tool_loop_with_a_final_answer(
    kind: MessageKind, attach: Attach
) -> None:
    seen: list[tuple[str, list[Message]]] = []
    budget = await attach(BudgetMiddleware(token_budget=300, input_weight=1.0, output_weight=2.0))
    agent = Agent(
        ScriptedChatModel(forever_calling_tools(seen)),
        kind=kind,
        tools=[echo],
        middlewares=[budget],
    )
    events = await collect(agent.reply("go"))
    # Each call costs 100 + 2*20 = 140: after 3 calls (420 >= 300) the 4th step must answer.
    assert [choice for choice, _ in seen] == ["auto", "auto", "auto", "none"]
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert agent.final_message is not None
    assert text_of(agent.final_message) == "Final answer: the budget ran out."
    hints = [e for e in events if e.type == "hint_block"]
    assert [(h.text, h.source) for h in hints] == [(DEFAULT_HINT, "budget")]  # type: ignore[union-attr]
    # The model saw the hint in that last step only; it is gone from the context afterwards.
    assert any(is_hint(m) for m in seen[-1][1])
    assert not any(is_hint(m) for _, msgs in seen[:-1] for m in msgs)
    assert not any(is_hint(m) for m in agent.state.context)


async def test_budget_resets_at_each_reply(kind: MessageKind, attach: Attach) -> None:
    seen: list[tuple[str, list[Message]]] = []
    budget = await attach(BudgetMiddleware(token_budget=250))
    agent = Agent(
        ScriptedChatModel(forever_calling_tools(seen)),
        kind=kind,
        tools=[echo],
        middlewares=[budget],
    )
    await collect(agent.reply("one"))
    first = [choice for choice, _ in seen]
    seen.clear()
    await collect(agent.reply("two"))
    # 120 per call: 240 < 250 after two calls, 360 after three.
    assert [choice for choice, _ in seen] == first == ["auto", "auto", "auto", "none"]


def test_budget_rejects_bad_parameters() -> None:
    with pytest.raises(ValueError, match="token_budget must be positive"):
        BudgetMiddleware(token_budget=0)
    with pytest.raises(ValueError, match="weights"):
        BudgetMiddleware(token_budget=1, output_weight=-1)


def dangling_history(kind: MessageKind) -> list[Message]:
    """Call b of m1 is never answered; the user answers a and asks again in one turn (one
    mixed agentic message; flat: a tool message, then the user's text)."""
    calls = [
        ToolCall(id="a", name="echo", arguments="{}"),
        ToolCall(id="b", name="echo", arguments="{}"),
    ]
    mixed = AgenticMessage(
        id="u2",
        role="user",
        blocks=[
            ToolResultBlock(call_id="a", name="echo", output=[TextBlock(text="answer a")]),
            TextBlock(text="never mind, second question"),
        ],
    )
    return [
        make_user_text(kind, "first question", id="u1"),
        make_assistant(kind, "", calls, id="m1"),
        *to_kind([mixed], kind),
    ]


def test_patching_places_results_right_after_the_calling_message(kind: MessageKind) -> None:
    history = dangling_history(kind)
    patched = PatchToolCallsMiddleware().patched(history, kind)
    assert [m.id for m in patched] == ["u1", "m1", "patch-b", *[m.id for m in history[2:]]]
    result = tool_results(patched[2])[0]
    assert (result.call_id, result.state) == ("b", "interrupted")
    assert (
        result.text
        == "Tool call echo (id b) was cancelled — another message arrived before it completed."
    )
    assert patched[2].kind == kind
    assert unanswered_tool_calls(patched) == []
    # Nothing the user said comes between the call and its placeholder.
    assert text_of(patched[-1]) == "never mind, second question"


async def test_the_model_never_sees_a_dangling_call(kind: MessageKind, attach: Attach) -> None:
    seen: list[list[Message]] = []

    def script(messages: Sequence[Message], tools: Any, tool_choice: str) -> ScriptedTurn:
        seen.append(list(messages))
        return ScriptedTurn(text="ok")

    patch = await attach(PatchToolCallsMiddleware(lambda call: f"no result for {call.id}"))
    agent = Agent(ScriptedChatModel(script), kind=kind, middlewares=[patch])
    agent.state.context.extend(dangling_history(kind))
    events = await collect(agent.reply("third question"))
    assert types(events)[-1] == "reply_end"
    assert unanswered_tool_calls(seen[0]) == []
    results = [r for m in agent.state.context for r in tool_results(m)]
    assert [(r.call_id, r.text) for r in results] == [("b", "no result for b"), ("a", "answer a")]
    ids = [m.id for m in agent.state.context]
    assert ids.index("patch-b") == ids.index("m1") + 1
