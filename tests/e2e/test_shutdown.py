"""Stopping the agent service while a sync tool never returns: it still exits (the tool's
thread does not hold it), the session is kept with the call answered as interrupted, and the
log stays clean."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from hookmesh.client import AgentClient, AgentClientError
from hookmesh.schema import tool_results
from hookmesh.services.agent import open_store
from tests.e2e.commands import DEADLINE
from tests.e2e.test_first_hour import NOISE

pytestmark = pytest.mark.timeout(120)

TOOL = '''
import threading


def wait_forever(reason: str) -> str:
    """Block the calling thread for good.

    Args:
        reason: Why.
    """
    threading.Event().wait()
    return reason
'''


async def test_sigterm_during_a_stuck_sync_tool(tmp_path: Path) -> None:
    (tmp_path / "stuck.py").write_text(TOOL)
    config = tmp_path / "agent.yaml"
    config.write_text(
        f"""
listen: 127.0.0.1:0
store: sqlite:///{tmp_path}/agent.db
grace_seconds: 1
tools: ["stuck:wait_forever"]
models:
  default:
    type: scripted
    turns: [{{tool_calls: [{{name: wait_forever, arguments: {{reason: test}}}}]}}, done]
"""
    )
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "hookmesh.cli", "serve", "agent", "--config", str(config),
        "--app-dir", str(tmp_path),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert server.stdout is not None and server.stderr is not None
    async with asyncio.timeout(DEADLINE):
        line = (await server.stdout.readline()).decode()
    address = line.split()[-1]
    async with AgentClient(address, timeout=DEADLINE) as client:
        stream = client.reply("go", session_id="stuck")
        async with asyncio.timeout(DEADLINE):
            async for event in stream:
                if event.type == "tool_result_start":
                    break
        server.send_signal(signal.SIGTERM)
        with pytest.raises(AgentClientError):
            async with asyncio.timeout(DEADLINE):
                async for _ in stream:
                    pass
    async with asyncio.timeout(DEADLINE):
        log = (await server.stderr.read()).decode()
        assert await server.wait() == 0, log
    assert not [n for n in NOISE if n in log], log

    store = await open_store(f"sqlite:///{tmp_path}/agent.db")
    try:
        saved = await store.get("anonymous", "stuck")
    finally:
        await store.close()
    assert saved is not None
    results = [r for m in saved.state.context for r in tool_results(m)]
    # Durability step: the reply was left at its last saved step, the tool's start, for the
    # next replica (or this one after a restart) to continue; nothing was answered for it.
    assert results == []
    pending = saved.state.pending
    assert pending is not None and pending.awaiting == "running"
    assert len(pending.started_calls) == 1


async def test_losing_a_sidecar_leaves_a_clean_log(tmp_path: Path) -> None:
    """The agent's log through a sidecar that dies (SIGKILL) and a cancelled reply, then a
    shutdown: warnings, never tracebacks or asyncio/OpenTelemetry noise."""
    from tests.sidecar_process import sidecar_process

    async with sidecar_process("hookmesh.suite.demo:AuditTrail") as sidecar:
        config = tmp_path / "agent.yaml"
        config.write_text(
            f"""
listen: 127.0.0.1:0
store: sqlite:///{tmp_path}/agent.db
grace_seconds: 1
tools: [hookmesh.suite.demo:get_weather]
models:
  default:
    type: scripted
    turns: [{{tool_calls: [{{name: get_weather, arguments: {{city: Oslo}}}}]}}, Cold.]
middlewares:
  - {{type: remote, target: "{sidecar.address}", failure_mode: fail_open, timeout: 2}}
"""
        )
        server = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "hookmesh.cli", "serve", "agent", "--config", str(config),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "HOOKMESH_LOG_LEVEL": "INFO"},
        )  # fmt: skip
        assert server.stdout is not None and server.stderr is not None
        async with asyncio.timeout(DEADLINE):
            address = (await server.stdout.readline()).decode().split()[-1]
        async with AgentClient(address, timeout=DEADLINE) as client:
            first = [e async for e in client.reply("weather?")]
            await sidecar.kill()
            second = [e async for e in client.reply("and now?")]
            stream = client.reply("once more")
            async with asyncio.timeout(DEADLINE):
                async for event in stream:
                    if event.type == "reply_start":
                        break
            await stream.aclose()  # the client goes away mid-reply
        server.send_signal(signal.SIGTERM)
        async with asyncio.timeout(DEADLINE):
            log = (await server.stderr.read()).decode()
            assert await server.wait() == 0, log
    assert first[-1].finish_reason == second[-1].finish_reason == "completed"
    assert "WARNING" in log  # the lost sidecar is reported …
    assert not [n for n in NOISE if n in log], log  # … and nothing else is noise
