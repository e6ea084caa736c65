"""A command run on a pseudo-terminal of a given size, as a person's terminal runs it."""

from __future__ import annotations

import asyncio
import fcntl
import os
import pty
import re
import signal
import struct
import subprocess
import termios
from pathlib import Path

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


def _run(
    argv: list[str], columns: int, env: dict[str, str], cwd: Path, timeout: float, until: str
) -> str:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    process = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, cwd=cwd,
        env={k: v for k, v in env.items() if k not in ("COLUMNS", "LINES")},
    )  # fmt: skip
    os.close(slave)
    chunks = []
    try:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
            if until and until in plain(b"".join(chunks).decode(errors="replace")):
                until = ""
                process.send_signal(signal.SIGTERM)
        process.wait(timeout)
    finally:
        if process.poll() is None:
            process.kill()
        os.close(master)
    return b"".join(chunks).decode(errors="replace")


async def on_terminal(
    *argv: str,
    columns: int,
    env: dict[str, str],
    cwd: Path,
    timeout: float = 60.0,
    until: str = "",
) -> str:
    """What `argv` wrote to a `columns`-wide terminal (stdout and stderr), escape codes kept;
    with `until`, it gets SIGTERM once that text has appeared (a server, say)."""
    return await asyncio.to_thread(_run, list(argv), columns, env, cwd, timeout, until)


def plain(text: str) -> str:
    """`text` without terminal escape codes and carriage returns."""
    return _ANSI.sub("", text)
