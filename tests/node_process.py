"""Running a Node.js script to its end from an async test, within a deadline."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest


async def run_node(
    node: str, *args: str, timeout: float, cwd: Path | None = None
) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of `node ARGS`, without blocking the event loop; the
    test fails (the process killed) when it takes longer than `timeout` seconds."""
    proc = await asyncio.create_subprocess_exec(
        node,
        *args,
        cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(timeout):
            stdout, stderr = await proc.communicate()
    except TimeoutError:
        proc.kill()
        await proc.wait()
        pytest.fail(f"node {' '.join(args)} did not finish within {timeout:g} s")
    assert proc.returncode is not None
    return proc.returncode, stdout.decode(), stderr.decode()


NODE_DIR = Path(__file__).resolve().parents[1] / "clients" / "node"
"""The Node package whose test scripts the Node tests run."""


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
