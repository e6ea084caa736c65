"""Sidecars built on the Go and Node SDKs, as the tests run them: one process on
127.0.0.1:0 that prints ``listening on ADDRESS`` first, and the audit example's check
through a real agent (the same for every language)."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from hookmesh.agent import Agent
from hookmesh.models import ScriptedChatModel
from hookmesh.remote import RemoteMiddleware
from hookmesh.schema import MessageKind
from hookmesh.testing import ServerProcess
from tests.agent_helpers import collect, customs


@asynccontextmanager
async def listening(
    *argv: str, env: dict[str, str] | None = None, listen: str = "127.0.0.1:0"
) -> AsyncIterator[ServerProcess]:
    """Run `argv --listen LISTEN` until the block ends, its address read from its first
    line; its stdout stays readable."""
    process = await asyncio.create_subprocess_exec(
        *argv, "--listen", listen,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    sidecar = ServerProcess(process, "")
    try:
        first = await sidecar.line()
        assert first.startswith("listening on "), first
        sidecar.address = first.removeprefix("listening on ")
        yield sidecar
    finally:
        await sidecar.kill()


async def assert_audits_a_reply(sidecar: ServerProcess, kind: MessageKind) -> None:
    """The audit example, driven by a real agent: one JSON line per event it saw (each of
    this reply) and a final ``audit`` report counting them, just before reply_end."""
    remote = await RemoteMiddleware.connect(sidecar.address, timeout=5)
    try:
        model = ScriptedChatModel(["audited answer"], stream=True, chunk_size=4)
        agent = Agent(model, kind=kind, middlewares=[remote])
        events = await collect(agent.reply("go"))
    finally:
        await remote.aclose()
    lines = [json.loads(await sidecar.line()) for _ in range(len(events) - 1)]
    [report] = [e for e in customs(events) if e.name == "audit"]
    assert events[-1].type == "reply_end"
    assert events[-2] is report
    assert report.value == len(events) - 2
    assert [line["event"] for line in lines] == [e.type for e in events if e is not report]
    assert {line["reply"] for line in lines} == {events[0].reply_id}
