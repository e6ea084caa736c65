"""Two agent service replicas on one PostgreSQL: one reply per session across both, a paused
reply resumes on the other, a session deleted on one is gone on both."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from hookmesh.agent import Confirmation
from hookmesh.client import AgentClient, AgentClientError
from hookmesh.schema import text_of
from hookmesh.services.agent import AgentService, load_config, start_agent_service
from tests.agent_helpers import SHORT_TIMEOUT
from tests.mesh_app import PARK, Gate
from tests.session_backends import SessionBackend

pytestmark = pytest.mark.timeout(60)

Start = Callable[..., Awaitable[AgentService]]


@pytest.fixture
async def gate(tmp_path: Path) -> AsyncIterator[Gate]:
    async with Gate(tmp_path / "gate.sock") as opened:
        yield opened


@pytest.fixture
async def replica(
    postgres_backend: SessionBackend, gate: Gate
) -> AsyncIterator[Callable[..., Awaitable[AgentService]]]:
    """Starts replicas of one agent service on the test's PostgreSQL schema."""
    services: list[AgentService] = []

    async def start(turns: list[Any] | None = None) -> AgentService:
        config = load_config(
            None,
            **postgres_backend.config(),
            tools=["tests.service_tools:delete_file"],
            models={"default": {"type": "scripted", "turns": turns or ["hello there"]}},
            middlewares=[
                {
                    "type": "local",
                    "import": "tests.mesh_app:GateMiddleware",
                    "params": {"path": str(gate.path)},
                }
            ],
        )
        service = await start_agent_service(config, address="127.0.0.1:0")
        services.append(service)
        return service

    try:
        yield start
    finally:
        gate.open()
        for service in services:
            await service.stop(None)


def _client(service: AgentService) -> AgentClient:
    return AgentClient(f"127.0.0.1:{service.port}", timeout=SHORT_TIMEOUT)


async def test_a_session_replies_on_one_replica_at_a_time(replica: Start, gate: Gate) -> None:
    first, second = await replica(), await replica()
    async with _client(first) as one, _client(second) as two:
        parked = one.reply(PARK, session_id="s1")
        async with asyncio.timeout(SHORT_TIMEOUT):
            assert (await anext(parked)).type == "reply_start"
        await gate.wait_for(1, SHORT_TIMEOUT)
        for attempt in (two.text("hello", session_id="s1"), two.delete_session("s1")):
            with pytest.raises(AgentClientError) as busy:
                await attempt
            assert (busy.value.code, busy.value.reason) == (
                grpc.StatusCode.FAILED_PRECONDITION,
                "SESSION_BUSY",
            )
        assert await two.text("hello", session_id="s2") == "hello there"  # others go on
        gate.open()
        async with asyncio.timeout(SHORT_TIMEOUT):
            assert [e.type async for e in parked][-1] == "reply_end"
        assert await two.text("again", session_id="s1") == "hello there"
        session = await one.get_session("s1")
    assert [text_of(m) for m in session.context] == [PARK, "hello there", "again", "hello there"]


async def test_a_paused_reply_resumes_on_another_replica(replica: Start) -> None:
    turns = [{"tool_calls": [{"name": "delete_file", "arguments": {"path": "/tmp/x"}}]}, "done"]
    first, second = await replica(turns), await replica(["deleted it"])
    async with _client(first) as one, _client(second) as two:
        events = [e async for e in one.reply("clean up", session_id="p")]
        assert events[-1].finish_reason == "awaiting_confirmation"  # type: ignore[union-attr]
        call_id = (await two.get_session("p")).pending_calls[0].id
        resumed = [
            e
            async for e in two.resume(
                "p", confirmations=[Confirmation(call_id=call_id, confirmed=True)]
            )
        ]
        assert resumed[-1].finish_reason == "completed"  # type: ignore[union-attr]
        assert (await one.get_session("p")).status == "idle"
        await one.delete_session("p")
        with pytest.raises(AgentClientError) as gone:
            await two.get_session("p")
    assert gone.value.reason == "SESSION_NOT_FOUND"
