"""Node.js from tests: a script run to its end within a deadline, and the clients/node sidecar."""

from __future__ import annotations

import asyncio
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

NODE_DIR = Path(__file__).resolve().parents[1] / "clients" / "node"
"""The Node package: its sidecar, and the test scripts the Node tests run."""
_START_TIMEOUT = 20.0
"""Seconds node may take to load the protos and print its `listening on` line."""
_STOP_TIMEOUT = 10.0


async def run_node(
    node: str, *args: str, timeout: float, cwd: Path | None = None, stdin: str = ""
) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of `node ARGS` fed `stdin`, without blocking the event
    loop; the test fails (the process killed) when it takes longer than `timeout` seconds."""
    proc = await asyncio.create_subprocess_exec(
        node,
        *args,
        cwd=cwd,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(timeout):
            stdout, stderr = await proc.communicate(stdin.encode())
    except TimeoutError:
        proc.kill()
        await proc.wait()
        pytest.fail(f"node {' '.join(args)} did not finish within {timeout:g} s")
    assert proc.returncode is not None
    return proc.returncode, stdout.decode(), stderr.decode()


def node_binary() -> str:
    """The `node` to run the Node package with; the test fails when it cannot run."""
    if not (NODE_DIR / "node_modules").is_dir():
        pytest.fail("clients/node/node_modules is missing: run `npm ci --prefix clients/node`")
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not on PATH: install Node.js 20 or newer")
    return node


def start_node_sidecar(
    *args: str, env: dict[str, str] | None = None, script: str = "sidecar.js"
) -> tuple[subprocess.Popen[bytes], str]:
    """Start `node clients/node/SCRIPT --listen 127.0.0.1:0 ARGS`; return it and its address."""
    proc = subprocess.Popen(
        [node_binary(), str(NODE_DIR / script), "--listen", "127.0.0.1:0", *args],
        stdout=subprocess.PIPE,
        env=env,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + _START_TIMEOUT
    seen = b""
    while b"\n" not in seen:
        left = deadline - time.monotonic()
        ready, _, _ = select.select([proc.stdout], [], [], max(left, 0))
        chunk = os.read(proc.stdout.fileno(), 4096) if ready else b""
        if not chunk:
            stop_node(proc)
            why = "exited" if ready else f"printed no line within {_START_TIMEOUT:g} s"
            pytest.fail(f"the node sidecar {why}; stdout so far: {seen!r}")
        seen += chunk
    line = seen.split(b"\n", 1)[0].decode()
    if not line.startswith("listening on "):
        stop_node(proc)
        pytest.fail(f"the node sidecar printed {line!r}, not 'listening on HOST:PORT'")
    return proc, line.removeprefix("listening on ")


def stop_node(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=_STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


async def node_report(script: str, package: str, *args: str, timeout: float) -> dict[str, Any]:
    """The JSON object `clients/node/test/<script>` prints; the test fails when node or the
    npm `package` it needs is missing, or the script fails."""
    node = shutil.which("node")
    if node is None or not (NODE_DIR / "node_modules" / package).is_dir():
        pytest.fail(f"node or {package} is missing: run `make node`")
    code, out, err = await run_node(
        node, str(NODE_DIR / "test" / script), *args, timeout=timeout, cwd=NODE_DIR
    )
    assert code == 0, err
    return json.loads(out)  # type: ignore[no-any-return]
