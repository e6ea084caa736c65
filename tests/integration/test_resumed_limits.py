"""A reply under propagated limits that waits on a remote agent's confirmation: approving it
sends the remote agent its share as it is now (the limits extension on the resume), which
the remote reply runs under in full instead of what it had saved, so the top limit holds
across the pause (a real agent service behind a real A2A server on loopback)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc
import pytest

from hookmesh.a2a import Limits
from hookmesh.agent import Agent, Confirmation, Resume
from hookmesh.client import AgentClient, AgentClientError, SyncAgentClient
from hookmesh.middleware.builtin.propagated_limits import PropagatedLimitMiddleware
from hookmesh.middleware.builtin.remote_agent import RemoteAgentMiddleware
from hookmesh.models import ScriptedTurn
from hookmesh.schema import AgentEvent, Message, is_user, text_of, tool_calls
from tests.a2a_stack import a2a_stack
from tests.agent_helpers import collect
from tests.builtin_helpers import Recorded, calls
from tests.team_process import CONFIRMED_ENV

pytestmark = pytest.mark.timeout(120)
WAIT = 60.0


def _remote(messages: Sequence[Message], tools: Any, choice: Any) -> ScriptedTurn:
    """Two lookups, then a call needing confirmation, then six lookups, then an answer."""
    last_user = max(i for i, m in enumerate(messages) if is_user(m) and text_of(m))
    done = sum(1 for m in messages[last_user:] if tool_calls(m))
    weather = ("get_weather", {"city": "Oslo"})
    steps: list[list[tuple[str, Any]]] = [
        [weather] * 2,
        [("confirmed_effect", {"note": "book"})],
        [weather] * 6,
    ]
    return ScriptedTurn(tool_calls=steps[done]) if done < len(steps) else ScriptedTurn("Booked.")


def _nested_states(events: list[AgentEvent]) -> list[str]:
    return [e.state for e in events if e.type == "tool_result_end" and e.source_path]  # type: ignore[union-attr]


async def test_an_approved_remote_step_runs_under_the_share_sent_with_the_approval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ten calls in all. Before the pause: the call of desk (1), its two lookups and the call
    it pauses on (3). The approval call takes one more: five are left and sent. The remote
    reply had six left of the nine it was first sent; it gets five, so its sixth lookup is
    denied and the whole team makes exactly ten calls."""
    monkeypatch.setenv(CONFIRMED_ENV, str(tmp_path / "confirmed"))
    tools = ["hookmesh.suite.demo:get_weather", "tests.team_process:confirmed_effect"]
    async with (
        a2a_stack(tmp_path, agent={"tools": tools}, model=_remote) as stack,
        RemoteAgentMiddleware([{"name": "desk", "url": stack.url}]) as remote,
    ):
        top = Recorded(calls([("desk", {"message": "Book it."})], answer="Done."))
        agent = Agent(top.model, middlewares=[PropagatedLimitMiddleware(10), remote])
        events = await collect(agent.reply("Book a trip to Oslo."), WAIT)
        assert events[-1].finish_reason == "awaiting_confirmation"  # type: ignore[union-attr]
        (asked,) = [e for e in events if e.type == "require_user_confirm" and not e.source_path]
        yes = Confirmation(call_id=asked.tool_calls[0].id, confirmed=True)  # type: ignore[union-attr]
        resumed = await collect(agent.resume(Resume(confirmations=[yes])), WAIT)

    assert resumed[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert _nested_states(events) == ["success", "success"]
    after = _nested_states(resumed)
    assert after == ["success"] + ["success"] * 5 + ["denied"]  # confirmed_effect, lookups
    assert (tmp_path / "confirmed").read_text() == "confirmed book\n"


async def test_bad_limits_on_a_resume_are_refused_and_the_reply_stays_paused(
    tmp_path: Path,
) -> None:
    async with (
        a2a_stack(tmp_path) as stack,
        AgentClient(f"127.0.0.1:{stack.agent.port}", timeout=WAIT) as client,
    ):
        events = [e async for e in client.reply("delete /tmp/x", session_id="s")]
        assert events[-1].finish_reason == "awaiting_confirmation"  # type: ignore[union-attr]
        (asked,) = [e for e in events if e.type == "require_user_confirm"]
        yes = Confirmation(call_id=asked.tool_calls[0].id, confirmed=True)  # type: ignore[union-attr]
        bad = Limits(tool_calls=-1, cost_usd=float("nan"))
        with pytest.raises(AgentClientError) as caught:
            async for _ in client.resume("s", confirmations=[yes], limits=bad):
                pass
        info = await client.get_session("s")
    error = caught.value
    assert (error.code, error.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_OPTIONS")
    assert [v.field for v in error.violations] == ["limits.tool_calls", "limits.cost_usd"]
    assert info.status == "awaiting_confirmation"


async def test_the_sync_client_sends_limits_with_a_reply_and_a_resume(tmp_path: Path) -> None:
    """`SyncAgentClient.reply` and `.resume` take `limits` as `AgentClient`'s do: a reply
    sent no tool calls has its call denied; a resume's bad limits are refused naming the
    fields, and the reply stays paused for a good resume."""

    async with a2a_stack(tmp_path) as stack:

        def use() -> tuple[list[AgentEvent], AgentClientError, str, list[AgentEvent]]:
            target = f"127.0.0.1:{stack.agent.port}"
            with SyncAgentClient(target, timeout=WAIT) as client:
                bounded = list(client.reply("delete /tmp/x", session_id="a", limits=Limits(0)))
                events = list(client.reply("delete /tmp/x", session_id="s"))
                (asked,) = [e for e in events if e.type == "require_user_confirm"]
                yes = Confirmation(call_id=asked.tool_calls[0].id, confirmed=True)  # type: ignore[union-attr]
                bad = Limits(tool_calls=-1, cost_usd=float("nan"))
                with pytest.raises(AgentClientError) as caught:
                    list(client.resume("s", confirmations=[yes], limits=bad))
                status = client.get_session("s").status
                good = list(client.resume("s", confirmations=[yes], limits=Limits(5)))
            return bounded, caught.value, status, good

        bounded, error, status, good = await asyncio.to_thread(use)

    assert bounded[-1].finish_reason == "completed"  # type: ignore[union-attr]
    (denied,) = [e for e in bounded if e.type == "tool_result_end"]
    assert denied.state == "denied"  # type: ignore[union-attr]
    assert (error.code, error.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_OPTIONS")
    assert [v.field for v in error.violations] == ["limits.tool_calls", "limits.cost_usd"]
    assert status == "awaiting_confirmation"
    assert good[-1].finish_reason == "completed"  # type: ignore[union-attr]
