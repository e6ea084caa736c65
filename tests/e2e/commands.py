"""Running the `hookmesh` command (or one of its command modules) as its own process."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]
DEADLINE = 60.0


async def run(
    *args: str, module: str = "hookmesh.cli", timeout: float = DEADLINE, stdin: str = ""
) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of ``python -m MODULE ARGS...`` (wide terminal), fed
    `stdin`."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        module,
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "200"},
    )
    async with asyncio.timeout(timeout):
        out, err = await process.communicate(stdin.encode())
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()
