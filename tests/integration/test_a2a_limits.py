"""The limits extension at hookmesh's A2A server, as an outside A2A client uses it (the
official a2a-sdk): the card declares it, the limits in the message's metadata bound the reply,
the final status update reports what was spent, and bad limits fail with their field (at the
A2A server) or INVALID_ARGUMENT (at the agent service)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from a2a.types import SendMessageRequest, StreamResponse, TaskState
from google.protobuf import json_format

from hookmesh.a2a import (
    LIMITS_EXTENSION_URI,
    LIMITS_METADATA_KEY,
    SPENT_METADATA_KEY,
    Limits,
    data_of_parts,
)
from hookmesh.client import AgentClient, AgentClientError
from tests.a2a_stack import A2AStack, a2a_stack
from tests.integration.test_a2a_server import card_of, client_for, user

pytestmark = pytest.mark.timeout(60)
WAIT = 20.0


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[A2AStack]:
    async with a2a_stack(tmp_path) as running:
        yield running


async def _send(stack: A2AStack, limits: Any, binding: str = "JSONRPC") -> list[StreamResponse]:
    message = user("what is the weather")
    message.metadata.update({LIMITS_METADATA_KEY: limits})
    client = await client_for(stack, binding)
    try:
        async with asyncio.timeout(WAIT):
            return [e async for e in client.send_message(SendMessageRequest(message=message))]
    finally:
        await client.close()


def _final(events: list[StreamResponse]) -> Any:
    return [e.status_update for e in events if e.HasField("status_update")][-1]


def _results(events: list[StreamResponse]) -> list[str]:
    """The states of the remote reply's tool results (from the hookmesh events carried)."""
    out = []
    for e in events:
        meta = (
            json_format.MessageToDict(e.status_update.metadata)
            if e.HasField("status_update")
            else {}
        )
        event = meta.get("hookmeshEvent", {})
        if event.get("type") == "tool_result_end":
            out.append(event["state"])
    return out


async def test_the_card_declares_the_extension(stack: A2AStack) -> None:
    card = await card_of(stack)
    assert [e.uri for e in card.capabilities.extensions] == [LIMITS_EXTENSION_URI]


@pytest.mark.parametrize("binding", ["JSONRPC", "GRPC"])
async def test_the_limits_bound_the_reply_and_the_spend_is_reported(
    stack: A2AStack, binding: str
) -> None:
    spent = await _send(stack, {"toolCalls": 0}, binding)
    final = _final(spent)
    assert final.status.state == TaskState.TASK_STATE_COMPLETED
    assert _results(spent) == ["denied"]
    report = json_format.MessageToDict(final.metadata)[SPENT_METADATA_KEY]
    assert report["toolCalls"] == 0 and report["tokens"] > 0 and report["costUsd"] == 0

    allowed = await _send(stack, {"toolCalls": 5, "deadline": "2999-01-01T00:00:00Z"}, binding)
    assert _results(allowed) == ["success"]
    report = json_format.MessageToDict(_final(allowed).metadata)[SPENT_METADATA_KEY]
    assert report["toolCalls"] == 1


async def test_a_reply_without_limits_reports_nothing(stack: A2AStack) -> None:
    client = await client_for(stack)
    try:
        async with asyncio.timeout(WAIT):
            events = [e async for e in client.send_message(SendMessageRequest(message=user("hi")))]
    finally:
        await client.close()
    assert SPENT_METADATA_KEY not in json_format.MessageToDict(_final(events).metadata)


@pytest.mark.parametrize(
    ("limits", "field"),
    [
        ({"toolCalls": -1}, "toolCalls"),
        ({"deadline": "tomorrow"}, "deadline"),
        ({"tokens": 10, "budget": 3}, "budget"),
        ({"toolCalls": 3e9}, "toolCalls"),  # passes JSON, not the agent service's int32
        ({"tokens": 2.0**64}, "tokens"),
    ],
)
async def test_bad_limits_fail_the_task_with_their_field(
    stack: A2AStack, limits: dict[str, Any], field: str
) -> None:
    final = _final(await _send(stack, limits))
    assert final.status.state == TaskState.TASK_STATE_FAILED
    (details,) = data_of_parts(final.status.message.parts)
    assert details == {
        "reason": "INVALID_LIMITS",
        "field": f"metadata.{LIMITS_METADATA_KEY}.{field}",
    }


async def test_the_agent_service_refuses_a_negative_limit(stack: A2AStack) -> None:
    async with AgentClient(f"127.0.0.1:{stack.agent.port}") as client:
        with pytest.raises(AgentClientError) as caught:
            async for _ in client.reply("hi", limits=Limits(tool_calls=-1, cost_usd=-0.5)):
                pass
    error = caught.value
    assert (error.code, error.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_OPTIONS")
    assert [v.field for v in error.violations] == [
        "options.limits.tool_calls",
        "options.limits.cost_usd",
    ]


async def test_spent_tokens_fail_the_task_with_the_reason(stack: A2AStack) -> None:
    final = _final(await _send(stack, {"tokens": 0}))
    assert final.status.state == TaskState.TASK_STATE_FAILED
    (details,) = data_of_parts(final.status.message.parts)
    assert details == {"reason": "LIMIT_SPENT"}
    assert "the token limit of the top reply is spent" in final.status.message.parts[0].text
    report = json_format.MessageToDict(final.metadata)[SPENT_METADATA_KEY]
    assert report == {"toolCalls": 0, "tokens": 0, "costUsd": 0}


async def test_a_past_deadline_fails_the_task_with_the_reason(stack: A2AStack) -> None:
    final = _final(await _send(stack, {"deadline": "2001-01-01T00:00:00Z"}))
    (details,) = data_of_parts(final.status.message.parts)
    assert details == {"reason": "DEADLINE_EXCEEDED"}
    assert "2001-01-01T00:00:00.000Z" in final.status.message.parts[0].text


async def test_bad_limits_on_the_answer_keep_the_task_asking_and_the_reply_paused(
    stack: A2AStack,
) -> None:
    """Bad limits on the message answering an input-required task: the task asks again with
    the error (the reply stays paused, not stuck), and a right answer then resumes it."""
    from tests.integration.test_a2a_server import send, states

    client = await client_for(stack)
    try:
        events = await send(client, user("delete my notes"))
        assert states(events)[-1] == TaskState.TASK_STATE_INPUT_REQUIRED
        task_id, context_id = events[0].task.id, events[0].task.context_id
        bad = user("yes", task_id=task_id, context_id=context_id)
        bad.metadata.update({LIMITS_METADATA_KEY: {"toolCalls": -1}})
        events = await send(client, bad)
        assert states(events)[-1] == TaskState.TASK_STATE_INPUT_REQUIRED
        message = events[-1].status_update.status.message
        assert "toolCalls" in message.parts[0].text
        (pending,) = data_of_parts(message.parts)
        assert [c["name"] for c in pending["tool_calls"]] == ["delete_file"]
        events = await send(client, user("yes", task_id=task_id, context_id=context_id))
        assert states(events)[-1] == TaskState.TASK_STATE_COMPLETED
    finally:
        await client.close()
