"""A nested approval answered on another replica: two agent services on one PostgreSQL schema
behind Envoy; a supervisor's worker asks to confirm a call on the replica the reply lands on,
the reply pauses, and the user's answer goes through Envoy to the other replica, which
resumes the worker from the session: the call runs there, once, and the reply completes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hookmesh.agent import Confirmation
from hookmesh.client import AgentClient
from hookmesh.schema import text_of, tool_results
from tests.team_app import RUNS_ENV, runs
from tests.team_stack import drain, replicas

pytestmark = pytest.mark.timeout(300)
WAIT = 120.0
"""Seconds one call may take (the machine may be loaded)."""


def _front() -> dict[str, Any]:
    """A supervisor agent (`tests.team_app:ops_team`) whose first step says where it runs."""
    top = {
        "type": "scripted",
        "per_reply": True,
        "turns": [
            {"tool_calls": [{"name": "where", "arguments": {}}]},
            {"tool_calls": [{"name": "ask_ops", "arguments": {"task": "wipe the cache"}}]},
            "unused: the supervisor's confirm_ops call stands in for this step",
            "All done.",
        ],
    }
    return {
        "agent": {"name": "front"},
        "models": {"default": top},
        "tools": ["tests.team_app:where"],
        "middlewares": [{"type": "local", "import": "tests.team_app:ops_team"}],
    }


async def test_a_nested_approval_asked_on_one_replica_is_answered_through_another(
    postgres_url: str, tmp_path: Path
) -> None:
    runs_file = tmp_path / "runs"
    env = {RUNS_ENV: str(runs_file)}
    async with replicas(postgres_url, tmp_path, _front(), env) as (running, envoy):
        pids = {r.pid for r in running}
        async with AgentClient(envoy.address("agent"), timeout=WAIT) as client:
            paused = await drain(client.reply("Wipe the cache, please.", session_id="ops"))
            assert paused[-1].finish_reason == "awaiting_confirmation"  # type: ignore[union-attr]
            (asked,) = [e for e in paused if e.type == "require_user_confirm" and not e.source_path]
            (call,) = asked.tool_calls  # type: ignore[union-attr]
            assert call.name == "confirm_ops" and json.loads(call.arguments)["path"] == ["ops"]
            (deep,) = [e for e in paused if e.type == "require_user_confirm" and e.source_path]
            assert [c.name for c in deep.tool_calls] == ["wipe"]  # type: ignore[union-attr]
            [(_, asked_on)] = runs(str(runs_file))
            assert asked_on in pids

            # Envoy spreads calls round robin: the Resume lands on the other replica.
            yes = Confirmation(call_id=call.id, confirmed=True)
            resumed = await drain(client.resume("ops", confirmations=[yes]))
            info = await client.get_session("ops")

    assert resumed[-1].finish_reason == "completed", resumed[-1]  # type: ignore[union-attr]
    (replied, (wiped, answered_on)) = runs(str(runs_file))
    assert replied == ("replied", asked_on)
    assert wiped == "wiped cache"  # the worker's call ran once, after the approval
    assert answered_on in pids and answered_on != asked_on
    ran = [e for e in resumed if e.type == "tool_result_end" and e.source_path]
    assert [(e.source_path[0].agent_name, e.state) for e in ran] == [("ops", "success")]  # type: ignore[union-attr, index]
    (result,) = [r for m in info.context for r in tool_results(m) if r.call_id == call.id]
    assert result.text == "The ops worker is done."
    assert text_of(info.context[-1]) == "All done."
