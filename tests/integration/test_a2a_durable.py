"""A2A tasks outlive the gateway replica that ran them: two `hookmesh serve a2a` replicas share
one task store; the one running a task is SIGKILLed; the other answers `tasks/get` and
follows the task with `tasks/subscribe` to its end (the official a2a-sdk client on both)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import grpc
import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, create_client
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskState,
)

from hookmesh.client import AgentClient
from hookmesh.services.a2a import load_a2a_config, start_a2a_server
from hookmesh.testing import ServerProcess, hookmesh_process
from tests.a2a_stack import A2AStack, a2a_stack
from tests.integration.test_a2a_server import user
from tests.service_tools import GateState

pytestmark = pytest.mark.timeout(90)
WAIT = 30.0


async def _client(url: str) -> Client:
    async with httpx.AsyncClient() as http:
        card = await A2ACardResolver(http, url).get_agent_card()
    config = ClientConfig(supported_protocol_bindings=["JSONRPC"])
    config.grpc_channel_factory = grpc.aio.insecure_channel
    return await create_client(card, client_config=config)


@asynccontextmanager
async def _replica(stack: A2AStack, store: str) -> AsyncIterator[ServerProcess]:
    """A second A2A gateway, its own process, on the stack's agent and task store."""
    async with hookmesh_process(
        "serve",
        "a2a",
        "--listen",
        "127.0.0.1:0",
        "--agent",
        f"127.0.0.1:{stack.agent.port}",
        ready="a2a server listening on ",
        env={"HOOKMESH_A2A_STORE": store},
    ) as process:
        yield process


def _states(events: list[StreamResponse]) -> list[int]:
    return [e.status_update.status.state for e in events if e.HasField("status_update")]


def _type(event: StreamResponse) -> str:
    """The hookmesh event type a status update carries, or ''."""
    meta = event.status_update.metadata if event.HasField("status_update") else None
    return str(meta["hookmeshEvent"]["type"]) if meta and "hookmeshEvent" in meta else ""


async def _subscribe(client: Client, task_id: str) -> list[StreamResponse]:
    async with asyncio.timeout(WAIT):
        return [e async for e in client.subscribe(SubscribeToTaskRequest(id=task_id))]


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The replicas' shared task store: a SQLite file, or the session's PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/shared-a2a.db"
    return str(request.getfixturevalue("postgres_url"))


@pytest.mark.parametrize("when", ["while it runs", "after it ended"])
async def test_a_task_whose_replica_was_killed_is_followed_to_its_end_on_another(
    tmp_path: Path, store: str, when: str
) -> None:
    GateState.reset()
    async with a2a_stack(tmp_path, store=store) as stack, _replica(stack, store) as doomed:
        running = await _client(f"http://{doomed.address}")
        survivor = await _client(stack.url)
        try:
            stream = running.send_message(SendMessageRequest(message=user("open the gate")))
            async with asyncio.timeout(WAIT):
                task = (await anext(stream)).task
                await GateState.started.wait()
                async for seen in stream:  # until the gateway saved the gate's call
                    if _type(seen) == "tool_call_end":
                        break
            await doomed.kill()
            with contextlib.suppress(Exception):  # its connection is gone
                await stream.aclose()

            stored = await survivor.get_task(GetTaskRequest(id=task.id))
            assert stored.status.state in (
                TaskState.TASK_STATE_SUBMITTED,
                TaskState.TASK_STATE_WORKING,
            )
            if when == "after it ended":
                GateState.release.set()
                async with AgentClient(f"127.0.0.1:{stack.agent.port}") as agent:
                    ends = [
                        e.finish_reason  # type: ignore[union-attr]
                        async for e in agent.watch(task.context_id)
                        if e.type == "reply_end"
                    ]
                assert ends == ["completed"]
                events = await _subscribe(survivor, task.id)
            else:
                following = asyncio.create_task(_subscribe(survivor, task.id))
                GateState.release.set()
                events = await following

            assert events[0].task.id == task.id
            assert _states(events)[-1] == TaskState.TASK_STATE_COMPLETED
            tools = [t for t in map(_type, events) if t]
            # From the last event the store holds on (the killed replica saved some), in order.
            held = int(stored.metadata["hookmeshSeq"])
            seqs = [int(e.status_update.metadata["hookmeshSeq"]) for e in events if _type(e)]
            assert held > 0
            assert seqs == sorted(set(seqs)) and seqs[0] > held, (held, seqs)
            assert "reply_start" not in tools and "tool_result_end" in tools
            answers = [e for e in events if e.HasField("artifact_update")]
            assert [a.artifact_update.artifact.parts[0].text for a in answers] == [
                "The tool said: released"
            ]

            done = await survivor.get_task(GetTaskRequest(id=task.id))
            assert done.status.state == TaskState.TASK_STATE_COMPLETED
            assert [a.name for a in done.artifacts] == ["answer"]
            assert done.artifacts[0].parts[0].text == "The tool said: released"
        finally:
            await running.close()
            await survivor.close()

    # The store holds the end for a replica started afterwards, too.
    config = load_a2a_config(None, agent="127.0.0.1:1", store=store)
    later = await start_a2a_server(config, address="127.0.0.1:0")
    try:
        reader = await _client(f"http://127.0.0.1:{later.port}")
        try:
            again = await reader.get_task(GetTaskRequest(id=task.id))
        finally:
            await reader.close()
    finally:
        await later.stop(0.5)
    assert again.status.state == TaskState.TASK_STATE_COMPLETED
    assert len(again.artifacts) == 1


async def test_a_task_store_that_cannot_be_opened_stops_the_server_with_why(
    tmp_path: Path,
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    config = load_a2a_config(None, store=f"sqlite:///{blocker}/a2a.db")
    with pytest.raises(OSError, match=r"a2a\.db|directory"):
        await start_a2a_server(config, address="127.0.0.1:0")


@asynccontextmanager
async def _second(stack: A2AStack) -> AsyncIterator[Client]:
    """A client of another A2A server on the stack's agent and task store."""
    config = load_a2a_config(None, agent=f"127.0.0.1:{stack.agent.port}", store=stack.store)
    other = await start_a2a_server(config, address="127.0.0.1:0")
    try:
        client = await _client(f"http://127.0.0.1:{other.port}")
        try:
            yield client
        finally:
            await client.close()
    finally:
        await other.stop(0.5)


async def test_a_task_running_on_one_replica_is_canceled_on_another(tmp_path: Path) -> None:
    GateState.reset()
    async with a2a_stack(tmp_path) as stack, _second(stack) as other:
        first = await _client(stack.url)
        try:
            stream = first.send_message(SendMessageRequest(message=user("open the gate")))
            async with asyncio.timeout(WAIT):
                task = (await anext(stream)).task
                await GateState.started.wait()
                canceled = await other.cancel_task(CancelTaskRequest(id=task.id))
                assert canceled.status.state == TaskState.TASK_STATE_CANCELED
                async with AgentClient(f"127.0.0.1:{stack.agent.port}") as agent:
                    ends = [
                        e.finish_reason  # type: ignore[union-attr]
                        async for e in agent.watch(task.context_id)
                        if e.type == "reply_end"
                    ]
                assert ends == ["interrupted"], "the reply was stopped, not only the task"
                rest = [e async for e in stream]
            assert _states(rest)[-1] == TaskState.TASK_STATE_CANCELED
            got = await first.get_task(GetTaskRequest(id=task.id))
            assert got.status.state == TaskState.TASK_STATE_CANCELED
        finally:
            await first.close()


async def test_a_task_paused_on_one_replica_is_answered_on_another(tmp_path: Path) -> None:
    async with a2a_stack(tmp_path) as stack, _second(stack) as other:
        first = await _client(stack.url)
        try:
            async with asyncio.timeout(WAIT):
                events = [
                    e
                    async for e in first.send_message(
                        SendMessageRequest(message=user("delete my notes"))
                    )
                ]
                task = events[0].task
                assert _states(events)[-1] == TaskState.TASK_STATE_INPUT_REQUIRED
                answer = user("yes", task_id=task.id, context_id=task.context_id)
                events = [e async for e in other.send_message(SendMessageRequest(message=answer))]
            assert _states(events)[-1] == TaskState.TASK_STATE_COMPLETED
            done = await first.get_task(GetTaskRequest(id=task.id))
            assert done.status.state == TaskState.TASK_STATE_COMPLETED
            assert done.artifacts[0].parts[0].text == "The tool said: deleted notes.txt"
        finally:
            await first.close()
