"""Structured output through the A2A server, read by the official a2a-sdk client: the schema
in the message's metadata, the answer as the artifact's data part, a bad schema failing the
task with its reason and field."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from a2a.types import Message, Part, Role, SendMessageRequest, StreamResponse, TaskState

from hookmesh.a2a import DATA_MIME, OUTPUT_SCHEMA_METADATA_KEY, data_of_parts
from hookmesh.agent import FINAL_TOOL
from hookmesh.models import ScriptedTurn
from hookmesh.schema import Message as HookmeshMessage
from tests.a2a_stack import A2AStack, a2a_stack
from tests.integration.test_a2a_server import client_for

pytestmark = pytest.mark.timeout(60)
WAIT = 20.0
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "temp_c": {"type": "number"}},
    "required": ["city", "temp_c"],
}
GOOD = {"city": "Oslo", "temp_c": -3}


def _answer(unused_messages: Sequence[HookmeshMessage], unused_tools: Any, unused: str) -> Any:
    return ScriptedTurn(tool_calls=[(FINAL_TOOL, GOOD)])


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[A2AStack]:
    async with a2a_stack(tmp_path, model=_answer) as running:
        yield running


def _ask(output: Any) -> Message:
    message = Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[Part(text="W?")])
    message.metadata.update({OUTPUT_SCHEMA_METADATA_KEY: output})
    return message


async def _send(stack: A2AStack, binding: str, message: Message) -> list[StreamResponse]:
    client = await client_for(stack, binding)
    try:
        async with asyncio.timeout(WAIT):
            return [e async for e in client.send_message(SendMessageRequest(message=message))]
    finally:
        await client.close()


@pytest.mark.parametrize("binding", ["JSONRPC", "GRPC"])
async def test_the_answer_is_the_artifacts_data_part(stack: A2AStack, binding: str) -> None:
    events = await _send(stack, binding, _ask({"name": "Weather", "schema": SCHEMA}))
    (artifact,) = [e.artifact_update.artifact for e in events if e.HasField("artifact_update")]
    assert [p.media_type for p in artifact.parts] == [DATA_MIME]
    assert data_of_parts(artifact.parts) == [GOOD]
    final = [e.status_update.status.state for e in events if e.HasField("status_update")][-1]
    assert final == TaskState.TASK_STATE_COMPLETED


async def test_a_bad_schema_fails_the_task_with_its_field(stack: A2AStack) -> None:
    events = await _send(stack, "JSONRPC", _ask({"schema": {"type": "objekt"}}))
    (failed,) = [
        e.status_update.status
        for e in events
        if e.HasField("status_update")
        and e.status_update.status.state == TaskState.TASK_STATE_FAILED
    ]
    (details,) = data_of_parts(failed.message.parts)
    assert details == {
        "reason": "INVALID_OUTPUT_SCHEMA",
        "field": f"metadata.{OUTPUT_SCHEMA_METADATA_KEY}.schema.type",
    }
