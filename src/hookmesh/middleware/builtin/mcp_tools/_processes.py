"""Processes a stdio MCP server left behind: found by a marker in their environment, killed."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

MARKER = "HOOKMESH_MCP_SERVER_RUN"
"""Environment variable every stdio server (and so every process it starts) inherits; its
value names one run of one server."""


def marked(run_id: str) -> list[int]:
    """Pids of live processes whose environment carries `MARKER` = `run_id` (Linux /proc;
    empty elsewhere)."""
    needle = f"{MARKER}={run_id}".encode()
    found = []
    with contextlib.suppress(OSError):
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                environ = (entry / "environ").read_bytes()
            except OSError:  # gone, or not ours to read
                continue
            if needle in environ.split(b"\0"):
                found.append(int(entry.name))
    return found


def running(pid: int) -> bool:
    """Whether `pid` runs (a killed process waiting to be reaped does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] not in ("Z", "X")


def kill_marked(run_id: str, wait: float = 2.0) -> int:
    """SIGKILL every process left of run `run_id` and wait (up to `wait` s, blocking) until
    none runs; returns how many were signalled.

    NOTE(hookmesh): the SDK stops a stdio server by closing its stdin and kills the process
    group only when the server outlives that; a server that crashed (or exited) has no
    group leader left to wait for, so its children would live on as orphans.
    """
    count = 0
    killed: list[int] = []
    for pid in marked(run_id):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
            count += 1
            killed.append(pid)
    deadline = time.monotonic() + wait
    while any(running(pid) for pid in killed) and time.monotonic() < deadline:
        time.sleep(0.01)
    return count
