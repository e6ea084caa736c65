"""`hookmesh up --replicas 2`: PostgreSQL, Envoy and two agent processes from one command;
chats go through Envoy, a replica SIGKILLed costs the next chat nothing, sessions are shared,
SIGHUP reloads every live replica, and Ctrl-C stops it all cleanly."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from pathlib import Path

import pytest
import yaml

from tests.e2e.commands import DEADLINE, Suite, run
from tests.e2e.test_first_hour import NOISE

pytestmark = pytest.mark.timeout(240)

SUITE = {
    "listen": "127.0.0.1:0",
    "middlewares": [
        {
            "type": "local",
            "import": "hookmesh.middleware.builtin.memory:MemoryMiddleware",
            "params": {"target": "service:memory", "mode": "static_control"},
        },
        {"type": "remote", "sidecar": "audit", "failure_mode": "fail_open"},
    ],
    "sidecars": [
        {"name": "audit", "middleware": "hookmesh.suite.demo:AuditTrail", "listen": "127.0.0.1:0"}
    ],
    "services": {"memory": {"listen": "127.0.0.1:0"}},
}
"""The default suite's agent, memory and audit sidecar, every port picked at start."""


async def _up_replicas(folder: Path) -> tuple[Suite, dict[str, list[str]]]:
    """``hookmesh up --replicas 2`` until it is ready, and what it printed, line by line."""
    (folder / "suite.yaml").write_text(yaml.safe_dump(SUITE))
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "hookmesh.cli", "up", "--config", "suite.yaml", "--replicas", "2",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=folder,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    assert process.stdout is not None
    printed: dict[str, list[str]] = {}
    suite = Suite(process, {})
    try:
        async with asyncio.timeout(DEADLINE):
            while (line := (await process.stdout.readline()).decode()) and not line.startswith(
                "Ctrl-C"
            ):
                words = line.split()
                printed[words[0]] = words[1:]
        assert line.startswith("Ctrl-C"), f"up did not start: {(await suite.stop())[1]}"
    except BaseException:
        await suite.stop()
        raise
    return suite, printed


async def _chat(agent: str, folder: Path) -> str:
    code, out, err = await run("chat", "Hello there", "--target", agent, cwd=folder)
    assert code == 0, err
    assert "end: completed" in out
    return re.findall(r"session (\w+)", out)[0]


async def test_up_replicas_behind_envoy_survive_a_killed_replica(tmp_path: Path) -> None:
    suite, printed = await _up_replicas(tmp_path)
    try:
        agent = printed["agent"][0]
        assert printed["agent"][1:5] == ["envoy", "in", "front", "of"]
        assert printed["postgres"][0].startswith("postgresql://hookmesh@127.0.0.1:")
        first = await _chat(agent, tmp_path)

        os.kill(int(printed["replica-1"][2]), signal.SIGKILL)
        after = [await _chat(agent, tmp_path) for _ in range(2)]  # round robin: one on each

        code, listed, err = await run("sessions", "list", "--target", agent, cwd=tmp_path)
        assert code == 0, err
        assert all(s in listed for s in (first, *after))  # one database behind both

        assert suite.process.stdout is not None
        suite.process.send_signal(signal.SIGHUP)
        async with asyncio.timeout(DEADLINE):
            reloaded = (await suite.process.stdout.readline()).decode()
        assert reloaded == "reloading middlewares: 1 of 2 replicas\n"  # the live one
    finally:
        code, log = await suite.stop()
    assert code == 0, log
    assert not [n for n in NOISE if n in log], log
