"""A sidecar replaced at its address by one built on the Node SDK (and back) is described
again, under load, with no failed reply; a sidecar stopped with a grace period while a reply
is in flight lets that reply complete, or fails it cleanly when the grace runs out."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from hookmesh.agent import Agent
from hookmesh.models import ScriptedChatModel
from hookmesh.remote import RemoteMiddleware
from hookmesh.schema import AgentEvent, ReplyEndEvent
from hookmesh.testing import ServerProcess
from tests.agent_helpers import SHORT_TIMEOUT, collect, customs
from tests.mesh_app import GATE_ENV, Gate
from tests.node_process import NODE_DIR, node_binary
from tests.sidecar_process import sidecar_process

pytestmark = pytest.mark.timeout(120)

DEADLINE = 8.0
"""The message deadline: longer than the reconnect back-off and the sidecar's 5 s grace."""
LOAD = 20
"""Concurrent replies."""


@asynccontextmanager
async def _node_audit(listen: str) -> AsyncIterator[ServerProcess]:
    """The Node SDK's audit example serving at `listen`."""
    process = await asyncio.create_subprocess_exec(
        node_binary(), str(NODE_DIR / "examples" / "audit.js"), "--listen", listen,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    sidecar = ServerProcess(process, listen)
    try:
        assert await sidecar.line(20.0) == f"listening on {listen}"
        yield sidecar
    finally:
        await sidecar.kill()


async def _load(remote: RemoteMiddleware) -> list[list[AgentEvent]]:
    def agent() -> Agent:
        return Agent(ScriptedChatModel(["fine"]), middlewares=[remote])

    return list(await asyncio.gather(*(collect(agent().reply("hi")) for _ in range(LOAD))))


def _served(replies: list[list[AgentEvent]]) -> set[tuple[str, ...]]:
    """Per reply: its finish reason and the marks of the middleware that served it."""
    out = set()
    for events in replies:
        end = events[-1]
        assert isinstance(end, ReplyEndEvent), events
        marks = [f"{e.name}={e.value}" if e.name == "version" else e.name for e in customs(events)]
        out.add((end.finish_reason, *marks))
    return out


async def test_a_sidecar_swapped_for_a_node_sdk_one_at_its_address_and_back_is_described() -> None:
    async with sidecar_process("tests.rollout_middlewares:V1") as python:
        address = python.address
        remote = await RemoteMiddleware.connect(address, timeout=DEADLINE)
        try:
            assert _served(await _load(remote)) == {("completed", "version=v1")}
            first = (remote.middleware_key(), remote.description_hash)
            await python.kill()
            async with _node_audit(address) as node:
                # Replies sent at once wait for the new sidecar (agents built before its new
                # description keep their hooks: it applies to replies that start after it).
                assert {served[0] for served in _served(await _load(remote))} == {"completed"}
                await remote.wait_ready(SHORT_TIMEOUT)
                assert _served(await _load(remote)) == {("completed", "audit")}
                second = (remote.middleware_key(), remote.description_hash)
                assert remote.implements("on_reply") and not remote.implements("on_reasoning")
                await node.kill()
            async with sidecar_process("tests.rollout_middlewares:V2", listen=address):
                assert {served[0] for served in _served(await _load(remote))} == {"completed"}
                await remote.wait_ready(SHORT_TIMEOUT)
                assert _served(await _load(remote)) == {("completed", "version=v2")}
                third = (remote.middleware_key(), remote.description_hash)
        finally:
            await remote.aclose()
    assert [key for key, _ in (first, second, third)] == ["versioned", "audit", "versioned"]
    # The hash follows the description: V2 describes itself as V1 does.
    assert first[1] == third[1] != second[1]


@pytest.fixture
async def gate(tmp_path: Path) -> AsyncIterator[Gate]:
    async with Gate(tmp_path / "gate.sock") as opened:
        yield opened


async def test_a_draining_sidecar_completes_the_reply_in_flight(gate: Gate) -> None:
    env = {GATE_ENV: str(gate.path)}
    async with sidecar_process("tests.rollout_middlewares:GatedReasoning", env=env) as sidecar:
        remote = await RemoteMiddleware.connect(sidecar.address, timeout=DEADLINE)
        try:
            agent = Agent(ScriptedChatModel(["fine"]), middlewares=[remote])
            parked = asyncio.create_task(collect(agent.reply("park")))
            await gate.wait_for(1, SHORT_TIMEOUT)
            sidecar.process.send_signal(signal.SIGTERM)  # grace: 5 s (GOAWAY, no new calls)
            gate.open()
            async with asyncio.timeout(SHORT_TIMEOUT):
                events = await parked
                code = await sidecar.process.wait()
        finally:
            await remote.aclose()
    assert _served([events]) == {("completed", "version=gated")}
    assert code == 0


async def test_a_reply_held_past_the_sidecars_grace_fails_cleanly(gate: Gate) -> None:
    env = {GATE_ENV: str(gate.path)}
    async with sidecar_process("tests.rollout_middlewares:GatedReasoning", env=env) as sidecar:
        remote = await RemoteMiddleware.connect(sidecar.address, timeout=DEADLINE)
        try:
            agent = Agent(ScriptedChatModel(["fine"]), middlewares=[remote])
            parked = asyncio.create_task(collect(agent.reply("park")))
            await gate.wait_for(1, SHORT_TIMEOUT)
            sidecar.process.send_signal(signal.SIGTERM)  # the gate stays shut past the grace
            async with asyncio.timeout(SHORT_TIMEOUT):
                events = await parked
                code = await sidecar.process.wait()
        finally:
            await remote.aclose()
    ends = [e for e in events if isinstance(e, ReplyEndEvent)]
    assert [e.type for e in events[:1]] == ["reply_start"] and ends == [events[-1]]
    [end] = ends
    assert end.finish_reason == "error" and end.error is not None
    assert end.error.reason == "SIDECAR_UNAVAILABLE", end.error
    assert sidecar.address not in end.error.message
    assert code == 0
