"""Issue 27's approval scenario end to end: the top agent runs as two `hookmesh serve agent`
replicas on one PostgreSQL schema behind Envoy; it asks a middle agent over A2A (a process of
its own, at a stable address), which asks an inner one (another process) whose tool needs
confirmation. The client sees the top reply pause with who asks; the middle process is
SIGKILLed while paused and a new one starts on the same stores; the answer goes through
Envoy to the other top replica, down to the inner agent, whose tool runs once."""

from __future__ import annotations

import json
import sqlite3
from contextlib import AsyncExitStack, closing
from pathlib import Path
from typing import Any

import pytest

from hookmesh.agent import Confirmation
from hookmesh.client import AgentClient
from hookmesh.schema import text_of, tool_results
from tests.cut_proxy import cut_proxy
from tests.team_app import RUNS_ENV, runs
from tests.team_process import CONFIRMED_ENV, team_process
from tests.team_stack import asks, drain, member, replicas

pytestmark = pytest.mark.timeout(300)
WAIT = 120.0
"""Seconds one call may take (the machine may be loaded)."""


def _top(middle_url: str) -> dict[str, Any]:
    """The top agent: says where it runs, asks the middle agent, says where it runs again (the
    replica that took the answer), then answers."""
    where = {"tool_calls": [{"name": "where", "arguments": {}}]}
    turns = [
        where,
        {"tool_calls": [{"name": "middle", "arguments": {"message": "wipe it"}}]},
        "unused: the middle__confirm call stands in for this step",
        where,
        "All done.",
    ]
    return {
        "agent": {"name": "top"},
        "models": {"default": {"type": "scripted", "per_reply": True, "turns": turns}},
        "tools": ["tests.team_app:where"],
        "middlewares": [asks("middle", middle_url)],
    }


def _awaiting(db: Path) -> list[str]:
    """What each session in a team member's SQLite store awaits ('' for nothing)."""
    with closing(sqlite3.connect(db)) as connection:
        return [row[0] for row in connection.execute("SELECT awaiting FROM agent_sessions")]


async def test_an_inner_confirmation_survives_a_middle_kill_and_is_answered_on_another_replica(
    postgres_url: str, tmp_path: Path
) -> None:
    runs_file, confirmed = tmp_path / "runs", tmp_path / "confirmed"
    inner_turns = [
        {"tool_calls": [{"name": "confirmed_effect", "arguments": {"note": "wipe"}}]},
        "The inner agent is done.",
    ]
    middle_turns = [
        {"tool_calls": [{"name": "inner", "arguments": {"message": "wipe it"}}]},
        "unused: the inner__confirm call stands in for this step",
        "The middle agent is done.",
    ]
    inner = member(tmp_path, "inner", inner_turns, [], per_reply=True)
    env = {CONFIRMED_ENV: str(confirmed)}
    async with AsyncExitStack() as stack:
        inner_url = (await stack.enter_async_context(team_process(inner, env))).url
        # The middle's stable address (its card says so): each middle process serves behind it.
        front = await stack.enter_async_context(cut_proxy())
        middle_env = {**env, "HOOKMESH_A2A_PUBLIC_URL": f"http://{front.address}"}
        middle = member(tmp_path, "middle", middle_turns, [asks("inner", inner_url)], True)
        first = await stack.enter_async_context(team_process(middle, middle_env))
        front.upstream = first.url.removeprefix("http://")
        top = _top(middle_env["HOOKMESH_A2A_PUBLIC_URL"])
        running, envoy = await stack.enter_async_context(
            replicas(postgres_url, tmp_path, top, {RUNS_ENV: str(runs_file)})
        )
        pids = {r.pid for r in running}
        client = await stack.enter_async_context(AgentClient(envoy.address("agent"), timeout=WAIT))
        paused = await drain(client.reply("Wipe it, please.", session_id="hops"))
        await first.kill()  # the middle process dies while its reply is paused

        assert paused[-1].finish_reason == "awaiting_confirmation", paused[-1]  # type: ignore[union-attr]
        (asked,) = [e for e in paused if e.type == "require_user_confirm" and not e.source_path]
        (call,) = asked.tool_calls  # type: ignore[union-attr]
        assert call.name == "middle__confirm"
        assert json.loads(call.arguments)["path"] == ["middle", "inner"]
        (deep,) = [
            e for e in paused if e.type == "require_user_confirm" and len(e.source_path or ()) == 2
        ]
        assert [s.agent_name for s in deep.source_path] == ["middle", "inner"]  # type: ignore[union-attr]
        assert [c.name for c in deep.tool_calls] == ["confirmed_effect"]  # type: ignore[union-attr]
        assert not confirmed.exists()
        [(_, asked_on)] = runs(str(runs_file))
        assert asked_on in pids
        assert (
            _awaiting(tmp_path / "middle.db")
            == _awaiting(tmp_path / "inner.db")
            == ["confirmation"]
        )

        # A new middle process on the same stores, behind the same address.
        second = await stack.enter_async_context(team_process(middle, middle_env))
        front.upstream = second.url.removeprefix("http://")
        # Envoy spreads calls round robin: the Resume lands on the other replica.
        yes = Confirmation(call_id=call.id, confirmed=True)
        resumed = await drain(client.resume("hops", confirmations=[yes]))
        info = await client.get_session("hops")

    assert resumed[-1].finish_reason == "completed", resumed[-1]  # type: ignore[union-attr]
    assert confirmed.read_text() == "confirmed wipe\n"  # the inner tool ran exactly once
    (replied, (again, answered_on)) = runs(str(runs_file))
    assert replied == ("replied", asked_on)
    assert again == "replied" and answered_on in pids and answered_on != asked_on
    ran = [e for e in resumed if e.type == "tool_result_end" and len(e.source_path or ()) == 2]
    assert [(e.source_path[-1].agent_name, e.state) for e in ran] == [("inner", "success")]  # type: ignore[index, union-attr]
    # The session holds no pause any more; the middle's answer is the call's result.
    assert info.status == "idle" and not info.pending_calls
    (result,) = [r for m in info.context for r in tool_results(m) if r.call_id == call.id]
    assert result.text == "The middle agent is done."
    assert text_of(info.context[-1]) == "All done."
    assert _awaiting(tmp_path / "middle.db") == _awaiting(tmp_path / "inner.db") == [""]
