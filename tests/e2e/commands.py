"""Running the `hookmesh` command (or one of its command modules) as its own process."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]
DEADLINE = 60.0


async def run(
    *args: str,
    module: str = "hookmesh.cli",
    timeout: float = DEADLINE,
    cwd: Path = ROOT,
    env: dict[str, str] | None = None,
    stdin: str = "",
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
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
    )
    async with asyncio.timeout(timeout):
        out, err = await process.communicate(stdin.encode())
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


class Suite:
    """A `hookmesh up` process and the addresses it printed (``agent``, ``retrieval``, …;
    sidecars as ``sidecar NAME``)."""

    def __init__(self, process: asyncio.subprocess.Process, addresses: dict[str, str]) -> None:
        self.process = process
        self.addresses = addresses

    async def stop(self) -> tuple[int, str]:
        """Ctrl-C, then the exit code and everything it wrote to stderr."""
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGINT)
        assert self.process.stderr is not None
        async with asyncio.timeout(DEADLINE):
            err = await self.process.stderr.read()
            code = await self.process.wait()
        return code, err.decode()


async def start_up(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None) -> Suite:
    """``hookmesh up ARGS...`` until it says it is ready."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "hookmesh.cli", "up", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=cwd,
        env={**os.environ, "COLUMNS": "200", "PYTHONUNBUFFERED": "1", **(env or {})},
    )  # fmt: skip
    assert process.stdout is not None
    addresses: dict[str, str] = {}
    suite = Suite(process, addresses)
    try:
        async with asyncio.timeout(DEADLINE):
            while (line := (await process.stdout.readline()).decode()) and not line.startswith(
                "Ctrl-C"
            ):
                words = line.split()
                if words[0] == "sidecar":
                    addresses[f"sidecar {words[2]}"] = words[1]
                else:
                    addresses[words[0]] = words[1]
        assert line.startswith("Ctrl-C"), f"up did not start: {(await suite.stop())[1]}"
    except BaseException:
        await suite.stop()
        raise
    return suite
