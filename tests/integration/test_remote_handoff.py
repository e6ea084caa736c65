"""Handoffs to a remote A2A agent: a real agent service behind a real A2A server on loopback
receives the transfer (the history its filter lets through, then the message), takes over the
reply or hands back, is bound by the reply's propagated limits (the limits extension), and its
own confirmation pauses the top reply and, approved, runs once."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from hookmesh.agent import Agent, AgentState, Confirmation, ExternalResult, Resume
from hookmesh.middleware.builtin.handoff import (
    HANDOFF_METADATA_KEY,
    HISTORY_PREFIX,
    HandoffMiddleware,
    RemoteHandoff,
    RemoteHandoffUnavailableError,
)
from hookmesh.middleware.builtin.propagated_limits import PropagatedLimitMiddleware
from hookmesh.models import ScriptedTurn
from hookmesh.schema import Message, MessageKind, is_user, text_of, tool_calls, tool_results
from tests.a2a_stack import a2a_stack
from tests.agent_helpers import collect
from tests.builtin_helpers import Recorded, calls, results
from tests.team_process import CONFIRMED_ENV

pytestmark = pytest.mark.timeout(120)
WAIT = 60.0
DENIED = "the tool-call limit of the top reply is spent"


class Remote:
    """The remote agent's scripted model: `steps` (tool calls), one per step after the
    user's message, then `answer`; it records what each call saw."""

    def __init__(self, *steps: list[tuple[str, Any]], answer: str) -> None:
        self.steps, self.answer = steps, answer
        self.prompts: list[list[Message]] = []

    def __call__(self, messages: Sequence[Message], tools: Any, choice: Any) -> ScriptedTurn:
        self.prompts.append(list(messages))
        last_user = max(i for i, m in enumerate(messages) if is_user(m) and text_of(m))
        done = sum(1 for m in messages[last_user:] if tool_calls(m))
        if done < len(self.steps):
            return ScriptedTurn(tool_calls=list(self.steps[done]))
        return ScriptedTurn(self.answer)

    def user_text(self) -> str:
        """The remote reply's user message, as it saw it."""
        return text_of(next(m for m in reversed(self.prompts[0]) if is_user(m)))


@pytest.mark.parametrize("input_filter", ["all", "none"])
async def test_a_remote_receiver_takes_over_the_reply_seeing_what_its_filter_lets_through(
    tmp_path: Path, kind: MessageKind, input_filter: str
) -> None:
    remote = Remote(answer="Order 7 is refunded.")
    async with a2a_stack(tmp_path, model=remote) as stack:
        billing = RemoteHandoff(
            "billing",
            stack.url,
            "Refunds.",
            input_filter=input_filter,  # type: ignore[arg-type]
        )
        async with HandoffMiddleware([billing]) as handoffs:
            front = Recorded(calls([("transfer_to_billing", {"message": "Refund order 7."})]))
            agent = Agent(front.model, kind=kind, middlewares=[handoffs])
            events = await collect(agent.reply("I was charged twice for order 7."), WAIT)

    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    final = agent.final_message
    assert final is not None and text_of(final) == "Order 7 is refunded."
    assert final.name == "billing"
    assert final.metadata[HANDOFF_METADATA_KEY] == {"agent": "billing", "call_id": "call_1"}  # type: ignore[index]
    assert len(front.prompts) == 1  # the parent model never speaks again in this reply
    seen = remote.user_text()
    if input_filter == "all":
        history = f"{HISTORY_PREFIX}[user] I was charged twice for order 7."
        assert seen.startswith(history) and seen.endswith("Refund order 7.")
    else:
        assert seen == "Refund order 7."
    nested = [e for e in events if e.source_path]
    assert nested and {e.source_path[0].agent_name for e in nested} == {"billing"}  # type: ignore[index]
    task_ids = {e.source_path[0].run_id for e in nested}  # type: ignore[index]
    assert len(task_ids) == 1 and "" not in task_ids  # the remote task's id


async def test_a_remote_receiver_hands_back_within_the_propagated_limit(tmp_path: Path) -> None:
    """3 tool calls in all: the transfer takes one, the remote agent is sent the other two
    and makes them (its third attempt is denied there), reports them, and hands back; the
    parent's next transfer finds nothing left."""
    weather = [("get_weather", {"city": "Oslo"})]
    remote = Remote(weather, weather, weather, answer="Oslo: -3 °C, snow.")
    async with a2a_stack(tmp_path, model=remote) as stack:
        research = RemoteHandoff("research", stack.url, "Looks things up.", hand_back=True)
        async with HandoffMiddleware([research]) as handoffs:
            front = Recorded(
                calls(
                    [("transfer_to_research", {"message": "Weather in Oslo?"})],
                    [("transfer_to_research", {"message": "And again?"})],
                    answer="It snows in Oslo.",
                )
            )
            limit = PropagatedLimitMiddleware(3)
            agent = Agent(front.model, middlewares=[limit, handoffs])
            events = await collect(agent.reply("How is Oslo?"), WAIT)

    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    got = results(agent)
    assert got["call_1"].state == "success" and got["call_1"].text == "Oslo: -3 °C, snow."
    remote_ends = [e for e in events if e.type == "tool_result_end" and e.source_path]
    assert [e.state for e in remote_ends] == ["success", "success", "denied"]  # type: ignore[union-attr]
    assert got["call_2"].state == "denied" and DENIED in got["call_2"].text
    assert "3 calls in all" in got["call_2"].text
    assert text_of(agent.final_message) == "It snows in Oslo."  # type: ignore[arg-type]
    assert HANDOFF_METADATA_KEY not in (agent.final_message.metadata or {})  # type: ignore[union-attr]


async def test_a_remote_receivers_confirmation_pauses_the_reply_and_runs_once_approved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    confirmed = tmp_path / "confirmed"
    monkeypatch.setenv(CONFIRMED_ENV, str(confirmed))
    remote = Remote([("confirmed_effect", {"note": "refund 7"})], answer="Refund 7 is done.")
    agent_settings = {"tools": ["tests.team_process:confirmed_effect"]}
    async with a2a_stack(tmp_path, agent=agent_settings, model=remote) as stack:
        billing = RemoteHandoff("billing", stack.url, "Refunds.")
        async with HandoffMiddleware([billing]) as handoffs:
            front = Recorded(calls([("transfer_to_billing", {"message": "Refund order 7."})]))
            agent = Agent(front.model, middlewares=[handoffs])
            events = await collect(agent.reply("Refund order 7."), WAIT)
            assert events[-1].finish_reason == "awaiting_confirmation"  # type: ignore[union-attr]
            (asked,) = [e for e in events if e.type == "require_user_confirm" and not e.source_path]
            (call,) = asked.tool_calls  # type: ignore[union-attr]
            arguments = json.loads(call.arguments)
            assert call.name == "confirm_billing" and arguments["path"] == ["billing"]
            assert [a["tool"] for a in arguments["asks"]] == ["confirmed_effect"]
            (deep,) = [e for e in events if e.type == "require_user_confirm" and e.source_path]
            assert [s.agent_name for s in deep.source_path] == ["billing"]  # type: ignore[union-attr]
            assert not confirmed.exists()

        # Resumed by another agent from the saved state, with a new middleware.
        saved = agent.state.model_dump_json()
        async with HandoffMiddleware([RemoteHandoff("billing", stack.url, "Refunds.")]) as again:
            elsewhere = Agent(Recorded([]).model, middlewares=[again])
            elsewhere.state = AgentState.model_validate_json(saved)
            yes = Resume(confirmations=[Confirmation(call_id=call.id, confirmed=True)])
            resumed = await collect(elsewhere.resume(yes), WAIT)

    assert resumed[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert confirmed.read_text() == "confirmed refund 7\n"  # the remote tool ran once
    final = elsewhere.final_message
    assert final is not None and text_of(final) == "Refund 7 is done."
    assert final.name == "billing"


async def test_an_unreachable_remote_receiver_fails_a_fail_closed_start(tmp_path: Path) -> None:
    gone = RemoteHandoff("billing", "http://127.0.0.1:9", "Refunds.", timeout=5.0)
    with pytest.raises(RemoteHandoffUnavailableError, match="remote agent billing"):
        await HandoffMiddleware([gone]).start()
    # fail_open: the transfer is an error result, and the parent model goes on.
    async with HandoffMiddleware([gone], failure_mode="fail_open") as handoffs:
        front = Recorded(calls([("transfer_to_billing", {"message": "x"})], answer="Sorry."))
        agent = Agent(front.model, middlewares=[handoffs])
        events = await collect(agent.reply("Refund."), WAIT)
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    result = results(agent)["call_1"]
    assert result.state == "error" and "cannot reach the remote agent billing" in result.text
    assert text_of(agent.final_message) == "Sorry."  # type: ignore[arg-type]


async def test_rejecting_a_remote_receivers_ask_tells_its_task_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    confirmed = tmp_path / "confirmed"
    monkeypatch.setenv(CONFIRMED_ENV, str(confirmed))
    remote = Remote([("confirmed_effect", {"note": "refund 7"})], answer="Not refunded.")
    agent_settings = {"tools": ["tests.team_process:confirmed_effect"]}
    async with (
        a2a_stack(tmp_path, agent=agent_settings, model=remote) as stack,
        HandoffMiddleware([RemoteHandoff("billing", stack.url, "Refunds.")]) as handoffs,
    ):
        front = Recorded(calls([("transfer_to_billing", {"message": "Refund order 7."})]))
        agent = Agent(front.model, middlewares=[handoffs])
        events = await collect(agent.reply("Refund order 7."), WAIT)
        (asked,) = [e for e in events if e.type == "require_user_confirm" and not e.source_path]
        no = Confirmation(call_id=asked.tool_calls[0].id, confirmed=False, reason="not today")  # type: ignore[union-attr]
        resumed = await collect(agent.resume(Resume(confirmations=[no])), WAIT)

    assert resumed[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert not confirmed.exists()  # the remote call never ran
    (refused,) = [r for m in remote.prompts[-1] for r in tool_results(m)]
    assert refused.state == "denied" and "not today" in refused.text
    final = agent.final_message
    assert final is not None and text_of(final) == "Not refunded." and final.name == "billing"
    assert len(front.prompts) == 1  # the receiver answered; the parent model never spoke again


async def test_a_remote_receivers_external_call_pauses_the_reply_and_gets_its_result(
    tmp_path: Path, kind: MessageKind
) -> None:
    """The remote agent's task stops input-required awaiting external execution: the top
    reply pauses on ``external_billing`` naming the remote tool, and the caller's result,
    given through another agent on the saved state, reaches the remote task, whose agent
    goes on with it as its call's result."""
    remote = Remote([("ask_user", {"question": "Refund to the card?"})], answer="Refunded.")
    agent_settings = {"tools": ["tests.service_tools:ask_user"]}
    async with a2a_stack(tmp_path, agent=agent_settings, model=remote) as stack:
        async with HandoffMiddleware([RemoteHandoff("billing", stack.url, "Refunds.")]) as mw:
            front = Recorded(calls([("transfer_to_billing", {"message": "Refund order 7."})]))
            agent = Agent(front.model, kind=kind, middlewares=[mw])
            events = await collect(agent.reply("Refund order 7."), WAIT)
        assert events[-1].finish_reason == "awaiting_external_execution"  # type: ignore[union-attr]
        (asked,) = [
            e for e in events if e.type == "require_external_execution" and not e.source_path
        ]
        (call,) = asked.tool_calls  # type: ignore[union-attr]
        arguments = json.loads(call.arguments)
        assert call.name == "external_billing" and arguments["agent"] == "billing"
        assert arguments["path"] == ["billing"] and arguments["tool"] == "ask_user"
        assert json.loads(arguments["arguments"]) == {"question": "Refund to the card?"}
        (deep,) = [e for e in events if e.type == "require_external_execution" and e.source_path]
        assert [s.agent_name for s in deep.source_path] == ["billing"]  # type: ignore[union-attr]
        assert "external_billing" not in front.tools[0]

        saved = agent.state.model_dump_json()
        async with HandoffMiddleware([RemoteHandoff("billing", stack.url, "Refunds.")]) as again:
            elsewhere = Agent(Recorded([]).model, kind=kind, middlewares=[again])
            elsewhere.state = AgentState.model_validate_json(saved)
            given = Resume(external_results=[ExternalResult(call_id=call.id, output="Yes.")])
            resumed = await collect(elsewhere.resume(given), WAIT)

    assert resumed[-1].finish_reason == "completed"  # type: ignore[union-attr]
    (answer,) = [r for m in remote.prompts[-1] for r in tool_results(m)]
    assert (answer.name, answer.text, answer.state) == ("ask_user", "Yes.", "success")
    final = elsewhere.final_message
    assert final is not None and text_of(final) == "Refunded." and final.name == "billing"
    assert final.metadata[HANDOFF_METADATA_KEY]["agent"] == "billing"  # type: ignore[index]
