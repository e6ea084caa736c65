"""Tools the caller runs itself (ReplyRequest.client_tools) through the agent service."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import grpc
import pytest

from hookmesh.agent import ExternalResult, external_tool
from hookmesh.client import AgentClient, AgentClientError, text_of_events
from hookmesh.models import ScriptedChatModel, ScriptedTurn, ToolChoice
from hookmesh.schema import Message, tool_results
from hookmesh.services.agent import AgentService, load_config, start_agent_service
from tests.agent_helpers import SHORT_TIMEOUT

pytestmark = pytest.mark.timeout(60)

LOCATE = external_tool(
    "get_location",
    "The user's location, from the browser.",
    {"type": "object", "properties": {"precision": {"type": "string"}}},
)


class _Seen:
    """What the model was offered at each call."""

    tools: list[list[str]]


def _script(
    messages: Sequence[Message], tools: Sequence[dict[str, Any]], unused_choice: ToolChoice
) -> ScriptedTurn:
    _Seen.tools.append([t["name"] for t in tools])
    answered = [r.text for m in messages for r in tool_results(m)]
    if not answered:
        return ScriptedTurn(tool_calls=[("get_location", {"precision": "city"})])
    return ScriptedTurn(text=f"You are in {answered[-1]}.")


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[AgentService]:
    _Seen.tools = []
    settings = load_config(
        None, store=f"sqlite:///{tmp_path}/agent.db", tools=["tests.agent_helpers:echo"]
    )
    running = await start_agent_service(settings, address="127.0.0.1:0")
    running.servicer.models["default"] = ScriptedChatModel(_script)
    try:
        yield running
    finally:
        await running.stop(None)


async def test_a_client_tool_call_pauses_the_reply_and_resume_answers_it(
    service: AgentService,
) -> None:
    async with AgentClient(f"127.0.0.1:{service.port}", timeout=SHORT_TIMEOUT) as client:
        first = [e async for e in client.reply("Where am I?", client_tools=[LOCATE])]
        assert first[-1].finish_reason == "awaiting_external_execution"  # type: ignore[union-attr]
        [pause] = [e for e in first if e.type == "require_external_execution"]
        [call] = pause.tool_calls  # type: ignore[union-attr]
        assert (call.name, call.arguments) == ("get_location", '{"precision": "city"}')
        assert _Seen.tools == [["echo", "get_location"]]
        session_id = first[0].session_id  # type: ignore[union-attr]
        session = await client.get_session(session_id)
        assert session.status == "awaiting_external_execution"
        assert [c.id for c in session.pending_calls] == [call.id]

        result = ExternalResult(call_id=call.id, output="Oslo")
        resumed = [
            e
            async for e in client.resume(
                session_id, external_results=[result], client_tools=[LOCATE]
            )
        ]
        assert resumed[-1].finish_reason == "completed"  # type: ignore[union-attr]
        assert text_of_events(resumed) == "You are in Oslo."
        assert _Seen.tools[-1] == ["echo", "get_location"]


BAD_TOOLS = [
    ([external_tool("echo", "clash", {})], "client_tools[0].name"),
    ([LOCATE, LOCATE], "client_tools[1].name"),
    ([external_tool("no spaces", "bad", {})], "client_tools[0].name"),
    ([external_tool(f"t{i}", "many", {}) for i in range(65)], "client_tools"),
]


@pytest.mark.parametrize(("tools", "field"), BAD_TOOLS, ids=["clash", "twice", "name", "many"])
async def test_bad_client_tools_are_invalid_argument(
    service: AgentService, tools: list[Any], field: str
) -> None:
    async with AgentClient(f"127.0.0.1:{service.port}", timeout=SHORT_TIMEOUT) as client:
        with pytest.raises(AgentClientError) as exc:
            [e async for e in client.reply("hi", client_tools=tools)]
    assert exc.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert exc.value.reason == "INVALID_CLIENT_TOOLS"
    assert [v.field for v in exc.value.violations] == [field]
