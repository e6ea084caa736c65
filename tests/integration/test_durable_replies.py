"""Durable replies with real processes: an agent killed (SIGKILL) mid-reply and restarted
continues the reply; replicas on PostgreSQL behind Envoy killed at random under load, and
restarted one after another (SIGTERM), fail no reply; every client sees its reply's events
exactly as a run without faults, and every tool call takes effect once."""

from __future__ import annotations

import asyncio
import os
import random
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from hookmesh.client import AgentClient
from hookmesh.schema import AgentEvent
from hookmesh.testing import EnvoyProxy, ServerProcess, hookmesh_process
from tests.agent_helpers import SHORT_TIMEOUT
from tests.durable_app import ANSWER, EFFECTS_ENV, config, effects
from tests.envoy import CONFIG as ENVOY_CONFIG
from tests.mesh_app import GATE_ENV, Gate
from tests.session_backends import postgres_schema
from tests.sidecar_process import ROOT

pytestmark = pytest.mark.timeout(300)

REPLY_TIMEOUT = 120.0
"""Seconds a reply may take here, re-attaching included (replicas die and restart)."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@asynccontextmanager
async def _agent(path: Path, port: int, env: dict[str, str]) -> AsyncIterator[ServerProcess]:
    """`hookmesh serve agent` on a fixed loopback port (a restart comes back at the same
    address, as a pod behind a service does)."""
    async with hookmesh_process(
        "serve", "agent", "--config", str(path), "--listen", f"127.0.0.1:{port}",
        "--app-dir", str(ROOT), ready="agent service listening on ", env=env,
    ) as agent:  # fmt: skip
        yield agent


def _normal(events: list[AgentEvent]) -> list[dict[str, Any]]:
    """Events without what differs between replies (their ids), for comparing runs."""
    out = []
    for event in events:
        reply_id = event.reply_id
        dumped = event.model_dump(mode="json", exclude={"reply_id", "session_id"})
        out.append(
            yaml.safe_load(yaml.safe_dump(dumped).replace(reply_id, "R")) if reply_id else dumped
        )
    return out


def _first_difference(got: list[dict[str, Any]], expected: list[dict[str, Any]]) -> str:
    """Where two runs' events part, for the failure message."""
    for i, (a, b) in enumerate(zip(got, expected, strict=False)):
        if a != b:
            return f"event {i}: {a} != {b}"
    return f"{len(got)} events, expected {len(expected)}"


async def _reply(address: str, session_id: str, text: str) -> list[AgentEvent]:
    async with AgentClient(address, timeout=REPLY_TIMEOUT) as client:
        return [e async for e in client.reply(text, session_id=session_id)]


async def test_a_lone_sqlite_agent_killed_mid_tool_continues_the_reply_after_a_restart(
    tmp_path: Path,
) -> None:
    """SIGKILL while the tool runs (its effect done, its result not saved): the restarted
    process continues the reply, the client re-attaches and sees the events of a run without
    faults, and the tool ran twice but took effect once."""
    store = {"store": f"sqlite:///{tmp_path}/agent.db"}
    path = tmp_path / "agent.yaml"
    path.write_text(yaml.safe_dump(config(store, note="park")))
    effects_file = str(tmp_path / "effects")
    port = _free_port()
    async with Gate(tmp_path / "gate.sock") as gate:
        env = {EFFECTS_ENV: effects_file, GATE_ENV: str(gate.path)}
        address = f"127.0.0.1:{port}"
        async with _agent(path, port, env) as first:
            reference = await _reply_with_open_gate(address, gate)
            gate.close()
            reply = asyncio.create_task(_reply(address, "cut", "pay 1"))
            await gate.wait_for(2, SHORT_TIMEOUT)  # the second reply's tool is running
            await first.kill()
        async with _agent(path, port, env):
            async with asyncio.timeout(REPLY_TIMEOUT):
                events = await reply
    runs, took = effects(effects_file)
    cut_key = next(k for k in runs if runs[k] == 2)
    assert took == dict.fromkeys(runs, 1) and len(runs) == 2 and cut_key
    assert _normal(events) == _normal(reference)
    assert events[-1].type == "reply_end" and events[-1].finish_reason == "completed"  # type: ignore[union-attr]


async def _reply_with_open_gate(address: str, gate: Gate) -> list[AgentEvent]:
    """A reply without faults (the gate lets its tool through), for reference."""
    reply = asyncio.create_task(_reply(address, "reference", "pay 0"))
    await gate.wait_for(1, SHORT_TIMEOUT)
    gate.open()
    async with asyncio.timeout(REPLY_TIMEOUT):
        return await reply


@asynccontextmanager
async def _replicas(
    postgres_url: str, folder: Path, count: int
) -> AsyncIterator[tuple[list[ServerProcess | None], Callable[[int], Any], EnvoyProxy, str]]:
    """`count` replicas on one PostgreSQL schema behind Envoy; `restart(i)` starts replica i
    again at its address."""
    async with AsyncExitStack() as stack:
        backend = await stack.enter_async_context(postgres_schema(postgres_url))
        path = folder / "agent.yaml"
        path.write_text(yaml.safe_dump(config(backend.config(), sessions={"lease_seconds": 5})))
        effects_file = str(folder / "effects")
        env = {EFFECTS_ENV: effects_file}
        ports = [_free_port() for _ in range(count)]
        replicas: list[ServerProcess | None] = [None] * count
        stacks = [AsyncExitStack() for _ in range(count)]
        for s in stacks:
            stack.push_async_callback(s.aclose)

        async def restart(i: int) -> None:
            await stacks[i].aclose()
            stacks[i] = AsyncExitStack()
            replicas[i] = await stacks[i].enter_async_context(_agent(path, ports[i], env))

        await asyncio.gather(*(restart(i) for i in range(count)))
        envoy = await stack.enter_async_context(
            EnvoyProxy({"agent": [f"127.0.0.1:{p}" for p in ports]}, ENVOY_CONFIG)
        )
        yield replicas, restart, envoy, effects_file


async def test_replicas_killed_at_random_under_load_fail_no_reply(
    postgres_url: str, tmp_path: Path
) -> None:
    """200 replies through Envoy over three replicas, one SIGKILLed (and restarted at its
    address) each time the replies have streamed another share of their events: mid model
    stream, mid tool, between steps, wherever they are."""
    rng = random.Random(os.environ.get("CHAOS_SEED", "hookmesh"))
    async with _replicas(postgres_url, tmp_path, 3) as (replicas, restart, envoy, effects_file):
        address = envoy.address("agent")
        reference = await _reply(address, "reference", "pay 0000")
        per_reply = len(reference)
        total, kills = 200, 6
        seen = 0
        next_kill = [per_reply * total * (k + 1) // (kills + 1) for k in range(kills)]
        killed: asyncio.Queue[None] = asyncio.Queue()
        limit = asyncio.Semaphore(25)

        async def one(i: int) -> list[AgentEvent]:
            nonlocal seen
            async with limit, AgentClient(address, timeout=REPLY_TIMEOUT) as client:
                got = []
                async for event in client.reply(f"pay {i:04d}", session_id=f"s{i}"):
                    got.append(event)
                    seen += 1
                    if next_kill and seen >= next_kill[0]:
                        next_kill.pop(0)
                        killed.put_nowait(None)
                return got

        async def chaos() -> int:
            done = 0
            while done < kills:
                await killed.get()
                victim = rng.randrange(len(replicas))
                process = replicas[victim]
                assert process is not None
                await process.kill()
                await restart(victim)
                done += 1
            return done

        killer = asyncio.create_task(chaos())
        async with asyncio.timeout(REPLY_TIMEOUT * 2):
            results = await asyncio.gather(*(one(i) for i in range(total)))
            assert await killer == kills
    expected = _normal(reference)
    differ = [i for i, events in enumerate(results) if _normal(events) != expected]
    assert differ == [], _first_difference(_normal(results[differ[0]]), expected)
    _, took = effects(effects_file)
    assert len(took) == total + 1 and set(took.values()) == {1}  # each call once, in effect
    assert all(e.type != "text_block_delta" or e.delta in ANSWER for e in results[0])


async def test_a_rolling_restart_of_every_replica_fails_no_reply(
    postgres_url: str, tmp_path: Path
) -> None:
    """50 chats keep replying while each replica in turn is stopped (SIGTERM: it hands its
    replies over) and started again: every reply of every chat completes."""
    async with _replicas(postgres_url, tmp_path, 2) as (replicas, restart, envoy, effects_file):
        address = envoy.address("agent")
        stopping = asyncio.Event()
        failed: list[str] = []

        async def chat(i: int) -> int:
            count = 0
            async with AgentClient(address, timeout=REPLY_TIMEOUT) as client:
                while not stopping.is_set() or count == 0:
                    events = [
                        e async for e in client.reply(f"pay {i:04d}", session_id=f"c{i}-{count}")
                    ]
                    if events[-1].type != "reply_end" or events[-1].finish_reason != "completed":  # type: ignore[union-attr]
                        failed.append(f"c{i}-{count}")
                    count += 1
            return count

        chats = [asyncio.create_task(chat(i)) for i in range(50)]
        for i in range(len(replicas)):
            process = replicas[i]
            assert process is not None
            await restart(i)  # SIGTERM, wait for its exit, start again at the same address
        stopping.set()
        async with asyncio.timeout(REPLY_TIMEOUT * 2):
            counts = await asyncio.gather(*chats)
    assert failed == [] and all(counts)
    _, took = effects(effects_file)
    assert set(took.values()) == {1} and len(took) == sum(counts)
