"""`hookmesh serve a2a` against the official a2a-sdk client: the agent card, a streamed task, a
task that pauses for input and is answered, message/send without streaming, tasks/get and
tasks/cancel, the gRPC binding, a context as a session, the caller's token passed through."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, create_client
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    TaskState,
    a2a_pb2,
    a2a_pb2_grpc,
)
from a2a.utils.errors import TaskNotFoundError
from google.protobuf import json_format, timestamp_pb2

from hookmesh.a2a import EVENT_METADATA_KEY, data_of_parts, data_part
from hookmesh.client import AgentClient, AgentClientError
from hookmesh.services.a2a import load_a2a_config, start_a2a_server
from tests.a2a_stack import A2AStack, a2a_stack
from tests.service_tools import GateState

pytestmark = pytest.mark.timeout(60)
WAIT = 20.0


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[A2AStack]:
    GateState.reset()
    async with a2a_stack(tmp_path) as running:
        yield running


async def card_of(stack: A2AStack) -> Any:
    async with httpx.AsyncClient() as http:
        return await A2ACardResolver(http, stack.url).get_agent_card()


async def client_for(stack: A2AStack, binding: str = "JSONRPC", **config: Any) -> Client:
    settings = ClientConfig(
        supported_protocol_bindings=[binding],
        grpc_channel_factory=grpc.aio.insecure_channel,
        **config,
    )
    return await create_client(await card_of(stack), client_config=settings)


def user(text: str = "", *, task_id: str = "", context_id: str = "", parts: Any = None) -> Message:
    return Message(
        role=Role.ROLE_USER,
        message_id=uuid.uuid4().hex,
        parts=parts or [Part(text=text)],
        task_id=task_id,
        context_id=context_id,
    )


async def send(client: Client, message: Message) -> list[StreamResponse]:
    async with asyncio.timeout(WAIT):
        return [e async for e in client.send_message(SendMessageRequest(message=message))]


def states(events: list[StreamResponse]) -> list[int]:
    return [e.status_update.status.state for e in events if e.HasField("status_update")]


def hookmesh_events(events: list[StreamResponse]) -> list[dict[str, Any]]:
    out = []
    for e in events:
        if e.HasField("status_update") and EVENT_METADATA_KEY in e.status_update.metadata:
            out.append(json_format.MessageToDict(e.status_update.metadata)[EVENT_METADATA_KEY])
    return out


async def test_the_card_names_the_agent_its_skills_bindings_and_bearer_scheme(
    stack: A2AStack,
) -> None:
    card = await card_of(stack)
    assert card.name == "weather-desk" and card.description == "Knows the weather."
    skills = {s.id: list(s.tags) for s in card.skills}
    assert skills["get_weather"] == ["tool", "agent", "read-only"]
    assert "needs-confirmation" in skills["delete_file"]
    bindings = {i.protocol_binding: i for i in card.supported_interfaces}
    assert set(bindings) == {"JSONRPC", "HTTP+JSON", "GRPC"}
    assert bindings["GRPC"].url == f"127.0.0.1:{stack.server.grpc_port}"
    assert all(i.protocol_version == "1.0" for i in card.supported_interfaces)
    assert card.security_schemes["bearer"].http_auth_security_scheme.scheme == "Bearer"
    assert card.capabilities.streaming


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON", "GRPC"])
async def test_a_streamed_task_completes_with_its_answer_as_the_artifact(
    stack: A2AStack, binding: str
) -> None:
    client = await client_for(stack, binding)
    try:
        events = await send(client, user("what is the weather in Oslo"))
        assert events[0].HasField("task")
        assert states(events)[0] == TaskState.TASK_STATE_WORKING
        assert states(events)[-1] == TaskState.TASK_STATE_COMPLETED
        progress = hookmesh_events(events)
        types = [e["type"] for e in progress]
        assert types[0] == "reply_start" and "tool_result_end" in types
        assert "reply_end" not in types  # the end is the task's state
        (artifact,) = [e.artifact_update.artifact for e in events if e.HasField("artifact_update")]
        assert artifact.name == "answer"
        assert [p.text for p in artifact.parts] == ["The tool said: -3 °C, snow"]
        task = await client.get_task(GetTaskRequest(id=events[0].task.id))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert task.artifacts[0].parts[0].text == "The tool said: -3 °C, snow"
    finally:
        await client.close()


async def test_message_send_without_streaming_returns_the_finished_task(stack: A2AStack) -> None:
    client = await client_for(stack, streaming=False)
    try:
        (response,) = await send(client, user("hello"))
        task = response.task
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert task.artifacts[0].parts[0].text == "Hello! You said: hello"
    finally:
        await client.close()


@pytest.mark.parametrize("answer", ["yes", "no"])
async def test_a_task_pauses_for_confirmation_and_the_answer_resumes_it(
    stack: A2AStack, answer: str
) -> None:
    client = await client_for(stack)
    try:
        events = await send(client, user("delete my notes"))
        assert states(events)[-1] == TaskState.TASK_STATE_INPUT_REQUIRED
        task_id, context_id = events[0].task.id, events[0].task.context_id
        status = events[-1].status_update.status
        (pending,) = data_of_parts(status.message.parts)
        assert pending["awaiting"] == "confirmation"
        assert [c["name"] for c in pending["tool_calls"]] == ["delete_file"]
        assert pending["tool_calls"][0]["arguments"] == {"path": "notes.txt"}
        events = await send(client, user(answer, task_id=task_id, context_id=context_id))
        assert states(events)[-1] == TaskState.TASK_STATE_COMPLETED
        text = events[-2].artifact_update.artifact.parts[0].text
        if answer == "yes":
            assert text == "The tool said: deleted notes.txt"
        else:
            assert text.startswith("The tool said: The user denied this call")
    finally:
        await client.close()


async def test_confirmations_can_come_as_data_and_a_wrong_answer_asks_again(
    stack: A2AStack,
) -> None:
    client = await client_for(stack)
    try:
        events = await send(client, user("delete my notes"))
        task_id, context_id = events[0].task.id, events[0].task.context_id
        (pending,) = data_of_parts(events[-1].status_update.status.message.parts)
        wrong = data_part({"confirmations": [{"call_id": "nope", "confirmed": True}]})
        events = await send(client, user(parts=[wrong], task_id=task_id, context_id=context_id))
        assert states(events)[-1] == TaskState.TASK_STATE_INPUT_REQUIRED
        assert "missing" in events[-1].status_update.status.message.parts[0].text
        call_id = pending["tool_calls"][0]["id"]
        right = data_part({"confirmations": [{"call_id": call_id, "confirmed": True}]})
        events = await send(client, user(parts=[right], task_id=task_id, context_id=context_id))
        assert states(events)[-1] == TaskState.TASK_STATE_COMPLETED
    finally:
        await client.close()


async def test_a_context_is_a_session(stack: A2AStack) -> None:
    client = await client_for(stack)
    try:
        first = await send(client, user("hello"))
        context_id = first[0].task.context_id
        second = await send(client, user("hello again", context_id=context_id))
        assert second[0].task.id != first[0].task.id
        async with AgentClient(f"127.0.0.1:{stack.agent.port}") as agent:
            session = await agent.get_session(context_id)
        assert len(session.context) == 4  # two questions, two answers
    finally:
        await client.close()


async def test_files_and_data_parts_reach_the_agent(stack: A2AStack) -> None:
    client = await client_for(stack)
    try:
        png = Part(raw=b"\x89PNG fake", media_type="image/png", filename="a.png")
        events = await send(client, user(parts=[Part(text="look"), png]))
        assert events[-2].artifact_update.artifact.parts[0].text == (
            "I see an image (image/png, 9 bytes)."
        )
        data = data_part({"city": "Oslo"})
        events = await send(client, user(parts=[data]))
        context_id = events[0].task.context_id
        async with AgentClient(f"127.0.0.1:{stack.agent.port}") as agent:
            session = await agent.get_session(context_id)
        (document,) = session.context[0].parts  # type: ignore[union-attr]
        assert document.source.mime_type == "application/json"
        assert json.loads(document.source.data) == {"city": "Oslo"}
    finally:
        await client.close()


async def test_cancel_interrupts_the_running_reply(stack: A2AStack) -> None:
    client = await client_for(stack)
    try:
        stream = client.send_message(SendMessageRequest(message=user("open the gate")))
        async with asyncio.timeout(WAIT):
            first = await anext(stream)
            await GateState.started.wait()
            task = await client.cancel_task(CancelTaskRequest(id=first.task.id))
            assert task.status.state == TaskState.TASK_STATE_CANCELED
            await stream.aclose()
            got = await client.get_task(GetTaskRequest(id=first.task.id))
        assert got.status.state == TaskState.TASK_STATE_CANCELED
    finally:
        await client.close()


async def test_canceling_a_paused_task_frees_its_context(stack: A2AStack) -> None:
    client = await client_for(stack)
    try:
        events = await send(client, user("delete my notes"))
        task = events[0].task
        assert states(events)[-1] == TaskState.TASK_STATE_INPUT_REQUIRED
        canceled = await client.cancel_task(CancelTaskRequest(id=task.id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        events = await send(client, user("hello", context_id=task.context_id))
        assert states(events)[-1] == TaskState.TASK_STATE_COMPLETED
        async with AgentClient(f"127.0.0.1:{stack.agent.port}") as agent:
            session = await agent.get_session(task.context_id)
        denied = [m for m in session.context if "canceled" in str(m)]
        assert denied, "the waiting call was answered as denied"
    finally:
        await client.close()


async def test_the_callers_token_reaches_the_agent_and_scopes_its_tasks(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("alice:alice-token\nbob:bob-token\n")
    async with a2a_stack(tmp_path, agent={"auth": {"token_file": str(tokens)}}) as stack:
        card = await card_of(stack)
        headers = {"Authorization": "Bearer alice-token"}
        async with httpx.AsyncClient(headers=headers, timeout=WAIT) as http:
            alice = await create_client(card, client_config=ClientConfig(httpx_client=http))
            events = await send(alice, user("hello"))
            assert states(events)[-1] == TaskState.TASK_STATE_COMPLETED
            task_id, context_id = events[0].task.id, events[0].task.context_id
        async with AgentClient(f"127.0.0.1:{stack.agent.port}", token="alice-token") as agent:
            assert len((await agent.get_session(context_id)).context) == 2
        async with httpx.AsyncClient(headers={"Authorization": "Bearer bob-token"}) as http:
            bob = await create_client(card, client_config=ClientConfig(httpx_client=http))
            with pytest.raises(TaskNotFoundError):
                await bob.get_task(GetTaskRequest(id=task_id))
        async with httpx.AsyncClient(timeout=WAIT) as http:
            anonymous = await create_client(card, client_config=ClientConfig(httpx_client=http))
            events = await send(anonymous, user("hello"))
            assert states(events)[-1] == TaskState.TASK_STATE_FAILED
            (detail,) = data_of_parts(events[-1].status_update.status.message.parts)
            assert detail == {"reason": "CREDENTIALS_REQUIRED"}


async def test_the_card_survives_an_agent_that_is_down(tmp_path: Path) -> None:
    config = load_a2a_config(None, agent="127.0.0.1:9", require_token=True)
    server = await start_a2a_server(config, address="127.0.0.1:0")
    try:
        async with httpx.AsyncClient() as http:
            card = await A2ACardResolver(http, f"http://127.0.0.1:{server.port}").get_agent_card()
            health = await http.get(f"http://127.0.0.1:{server.port}/healthz")
        assert card.name == "hookmesh agent" and [s.id for s in card.skills] == ["conversation"]
        assert "bearer" in card.security_requirements[0].schemes
        assert health.json() == {"status": "serving"}
    finally:
        await server.stop(0)


async def test_the_0_3_method_names_work_too(stack: A2AStack) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": "1",
        "method": "message/send",
        "params": {
            "message": {
                "kind": "message",
                "role": "user",
                "messageId": uuid.uuid4().hex,
                "parts": [{"kind": "text", "text": "hello"}],
            }
        },
    }
    async with httpx.AsyncClient(timeout=WAIT) as http:
        sent = (await http.post(f"{stack.url}/", json=body)).json()
        task = sent["result"]
        assert task["status"]["state"] == "completed"
        assert task["artifacts"][0]["parts"][0]["text"] == "Hello! You said: hello"
        get = {"jsonrpc": "2.0", "id": "2", "method": "tasks/get", "params": {"id": task["id"]}}
        got = (await http.post(f"{stack.url}/", json=get)).json()
    assert got["result"]["status"]["state"] == "completed"


@pytest.mark.parametrize(
    ("field", "request_pb"),
    [
        (
            "status_timestamp_after",
            a2a_pb2.ListTasksRequest(status_timestamp_after=timestamp_pb2.Timestamp(nanos=-1)),
        ),
        (
            "status_timestamp_after",
            a2a_pb2.ListTasksRequest(
                status_timestamp_after=timestamp_pb2.Timestamp(seconds=253402300800)
            ),
        ),
        ("status", a2a_pb2.ListTasksRequest(status=99)),  # type: ignore[arg-type]
    ],
    ids=["nanos -1", "year 10000", "unknown state"],
)
async def test_a_grpc_request_out_of_the_well_known_ranges_is_invalid_argument(
    stack: A2AStack, field: str, request_pb: Any
) -> None:
    """The a2a-sdk trusts Timestamps and enum numbers (it answered INTERNAL): the server
    checks them first and names the field."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{stack.server.grpc_port}") as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.ListTasks(request_pb, timeout=WAIT)
        error = AgentClientError.from_rpc_error(refused.value)
        assert (error.code, error.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_SCHEMA")
        assert [v.field for v in error.violations] == [field]
        assert not (await stub.ListTasks(a2a_pb2.ListTasksRequest(), timeout=WAIT)).tasks


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_the_task_store_keeps_at_most_max_tasks(tmp_path: Path, kind: str) -> None:
    """Every message/send makes a task; beyond the cap the oldest finished ones go, so the
    server's memory (or disk) stays bounded whoever calls."""
    store = "memory" if kind == "memory" else f"sqlite:///{tmp_path}/capped.db"
    async with a2a_stack(tmp_path, store=store, max_tasks=3) as stack:
        client = await client_for(stack)
        ids = []
        for n in range(5):
            events = await send(client, user(f"hello {n}"))
            ids.append(next(e.task.id for e in events if e.HasField("task")))
        async with grpc.aio.insecure_channel(f"127.0.0.1:{stack.server.grpc_port}") as channel:
            listed = await a2a_pb2_grpc.A2AServiceStub(channel).ListTasks(
                a2a_pb2.ListTasksRequest(), timeout=WAIT
            )
        assert sorted(t.id for t in listed.tasks) == sorted(ids[2:])
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id=ids[0]))
