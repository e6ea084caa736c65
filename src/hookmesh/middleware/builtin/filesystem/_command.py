"""Running one command for the filesystem middleware's ``execute`` tool: an argv (no shell) in
the workspace, with a deadline, a capped output and a clean environment."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

from hookmesh.middleware.builtin.filesystem._ops import FileToolError

_CHUNK = 65536
_ENV_KEPT = ("PATH", "LANG", "LC_ALL", "TZ")


def _environment(root: Path) -> dict[str, str]:
    """Only what commands need: the agent's own variables (API keys, tokens) stay out."""
    env = {k: os.environ[k] for k in _ENV_KEPT if k in os.environ}
    env.setdefault("PATH", os.defpath)
    env["HOME"] = str(root)
    return env


async def run_command(argv: list[str], root: Path, timeout: float, max_output: int) -> str:
    """Run `argv` in `root`; its exit code and combined stdout/stderr (the first `max_output`
    bytes; the rest is read and dropped, so the command never blocks on a full pipe).

    Raises:
        FileToolError: `argv` is empty, the program is not found, or the deadline passed
            (the command and its children are killed).
    """
    if not argv or not all(isinstance(a, str) and a for a in argv):
        raise FileToolError("argv must be a non-empty list of non-empty strings")
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=root,
            env=_environment(root),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
    except (FileNotFoundError, PermissionError) as exc:
        raise FileToolError(f"cannot run {argv[0]!r}: {exc.strerror}") from None
    assert proc.stdout is not None
    kept = bytearray()
    dropped = 0
    try:
        async with asyncio.timeout(timeout):
            while chunk := await proc.stdout.read(_CHUNK):
                room = max_output - len(kept)
                kept += chunk[:room]
                dropped += max(0, len(chunk) - room)
            code = await proc.wait()
    except TimeoutError:
        _kill(proc)
        await proc.wait()
        output = kept.decode("utf-8", errors="replace")
        raise FileToolError(
            f"{argv[0]} timed out after {timeout:g} s and was killed; output so far:\n{output}"
        ) from None
    except BaseException:
        _kill(proc)
        await proc.wait()
        raise
    output = kept.decode("utf-8", errors="replace")
    more = f"\n[{dropped} more bytes of output not shown]" if dropped else ""
    return f"exit code {code}\n{output}{more}"


def _kill(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
