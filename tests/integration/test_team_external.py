"""A sub-agent's external call through the real services: a supervisor's worker in an agent
service calls an external tool, the reply (and its session) pauses awaiting external
execution, and the caller's result, sent to a new agent service on the same store (a
restart, or another replica), reaches the worker; and the same two A2A levels down, where
a remote handoff receiver's worker calls it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from hookmesh.agent import Agent, AgentState, ExternalResult, Resume
from hookmesh.client import AgentClient
from hookmesh.middleware.builtin.handoff import HandoffMiddleware, RemoteHandoff
from hookmesh.models import ScriptedChatModel, ScriptedTurn
from hookmesh.schema import AgentEvent, Message, text_of, tool_results
from hookmesh.services.agent import load_config, start_agent_service
from tests.a2a_stack import a2a_stack
from tests.agent_helpers import collect
from tests.builtin_helpers import Recorded, calls

pytestmark = pytest.mark.timeout(120)
WAIT = 60.0
TEAM = [{"type": "local", "import": "tests.service_tools:locating_team"}]


def _boss(messages: Sequence[Message], tools: Any, choice: Any) -> ScriptedTurn:
    """Ask the scout; once a result is last, answer with it."""
    got = tool_results(messages[-1])
    if got:
        return ScriptedTurn(f"Boss: {got[0].text}")
    return ScriptedTurn(tool_calls=[("ask_scout", {"task": "Locate the user."})])


def _top_pause(events: list[AgentEvent]) -> Any:
    assert events[-1].finish_reason == "awaiting_external_execution"  # type: ignore[union-attr]
    (asked,) = [e for e in events if e.type == "require_external_execution" and not e.source_path]
    (call,) = asked.tool_calls  # type: ignore[union-attr]
    return call


async def test_a_workers_external_call_is_answered_through_a_restarted_service(
    tmp_path: Path,
) -> None:
    config = load_config(None, store=f"sqlite:///{tmp_path}/agent.db", middlewares=TEAM)

    first = await start_agent_service(config, address="127.0.0.1:0")
    first.servicer.models["default"] = ScriptedChatModel(_boss)
    try:
        async with AgentClient(f"127.0.0.1:{first.port}", timeout=WAIT) as client:
            paused = [e async for e in client.reply("Where am I?", session_id="s")]
            status = (await client.get_session("s")).status
    finally:
        await first.stop(0.5)
    call = _top_pause(paused)
    arguments = json.loads(call.arguments)
    assert call.name == "external_scout" and arguments["path"] == ["scout"]
    assert arguments["tool"] == "locate"
    assert status == "awaiting_external_execution"

    second = await start_agent_service(config, address="127.0.0.1:0")  # a new process's team
    second.servicer.models["default"] = ScriptedChatModel(_boss)
    try:
        async with AgentClient(f"127.0.0.1:{second.port}", timeout=WAIT) as client:
            result = ExternalResult(call_id=call.id, output="Oslo")
            resumed = [e async for e in client.resume("s", external_results=[result])]
            info = await client.get_session("s")
    finally:
        await second.stop(0.5)

    assert resumed[-1].finish_reason == "completed"  # type: ignore[union-attr]
    ran = [e for e in resumed if e.type == "tool_result_end" and e.source_path]
    assert [(e.source_path[0].agent_name, e.state) for e in ran] == [("scout", "success")]  # type: ignore[union-attr, index]
    assert text_of(info.context[-1]) == "Boss: The user is in Oslo."
    assert info.status == "idle"


async def test_an_external_call_two_a2a_levels_down_reaches_the_worker(
    tmp_path: Path, kind: Any
) -> None:
    """The top transfers to a hookmesh agent over A2A (`RemoteHandoff`) whose supervisor's
    worker calls `locate`: the top pauses on ``external_desk`` naming ``locate`` and the
    path ``[desk, scout]``, and the result goes down through the A2A task to the worker."""
    async with a2a_stack(tmp_path, agent={"middlewares": TEAM}, model=_boss) as stack:
        async with HandoffMiddleware([RemoteHandoff("desk", stack.url, "Finds people.")]) as mw:
            front = Recorded(calls([("transfer_to_desk", {"message": "Where is the user?"})]))
            agent = Agent(front.model, kind=kind, middlewares=[mw])
            events = await collect(agent.reply("Where am I?"), WAIT)
        call = _top_pause(events)
        arguments = json.loads(call.arguments)
        assert call.name == "external_desk" and arguments["path"] == ["desk", "scout"]
        assert arguments["tool"] == "locate"
        assert json.loads(arguments["arguments"]) == {"precision": "city"}

        saved = agent.state.model_dump_json()
        async with HandoffMiddleware([RemoteHandoff("desk", stack.url, "Finds people.")]) as again:
            elsewhere = Agent(Recorded([]).model, kind=kind, middlewares=[again])
            elsewhere.state = AgentState.model_validate_json(saved)
            given = Resume(external_results=[ExternalResult(call_id=call.id, output="Oslo")])
            resumed = await collect(elsewhere.resume(given), WAIT)

    assert resumed[-1].finish_reason == "completed"  # type: ignore[union-attr]
    final = elsewhere.final_message
    assert final is not None and final.name == "desk"
    assert text_of(final) == "Boss: The user is in Oslo."
