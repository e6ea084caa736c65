"""Running a Node.js script to its end from an async test, within a deadline."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest


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
