"""Child processes with asyncio pipes, safe in a process that runs gRPC, on any event loop."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

_PIPE_LIMIT = 256 * 1024


@dataclass
class Child:
    """A running child: stdin as a StreamWriter, stdout and stderr as StreamReaders, and a
    future of its exit status (set once the child is reaped, whatever its pipes do)."""

    popen: subprocess.Popen[bytes]
    stdin: asyncio.StreamWriter
    stdout: asyncio.StreamReader
    stderr: asyncio.StreamReader
    exited: asyncio.Future[int]
    _transports: tuple[asyncio.BaseTransport, ...]

    @property
    def pid(self) -> int:
        """The child's process id."""
        return self.popen.pid

    def kill(self) -> None:
        """SIGKILL the child (no-op once it has exited) and close every pipe."""
        if not self.exited.done():
            with contextlib.suppress(ProcessLookupError):
                self.popen.kill()
        for transport in self._transports:
            transport.close()


def _same(protocol: asyncio.StreamReaderProtocol) -> asyncio.StreamReaderProtocol:
    return protocol


def _exit_future(popen: subprocess.Popen[bytes]) -> asyncio.Future[int]:
    loop = asyncio.get_running_loop()
    try:
        pidfd = os.pidfd_open(popen.pid)
    except (AttributeError, OSError):  # no pidfd (not Linux, or an old kernel): a thread waits
        return asyncio.ensure_future(asyncio.to_thread(popen.wait))
    exited: asyncio.Future[int] = loop.create_future()

    def reap() -> None:
        loop.remove_reader(pidfd)
        os.close(pidfd)
        exited.set_result(popen.wait())  # a zombie by now: returns at once, and reaps it

    loop.add_reader(pidfd, reap)
    return exited


async def spawn(args: Sequence[str]) -> Child:
    """Start `args` (never through a shell) with piped stdin, stdout and stderr.

    NOTE(hookmesh): not asyncio.create_subprocess_exec: under uvloop it forks through libuv,
    which runs gRPC's pthread_atfork handlers, and a child forked while gRPC's poller runs
    can abort before exec (measured: espeak-ng "exited" with SIGABRT). subprocess.Popen uses
    vfork/posix_spawn, which runs no fork handlers; the pipes then join the running loop, and
    a pidfd reports the exit, so no child watcher is involved.

    Raises:
        OSError: The program cannot be started (not found, not executable).
    """
    loop = asyncio.get_running_loop()
    popen = subprocess.Popen(  # noqa: ASYNC220 (vfork + exec: as quick as asyncio's own)
        list(args), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert popen.stdin and popen.stdout and popen.stderr
    transports: list[asyncio.BaseTransport] = []
    try:
        readers = []
        for pipe in (popen.stdout, popen.stderr):
            reader = asyncio.StreamReader(limit=_PIPE_LIMIT)
            protocol = asyncio.StreamReaderProtocol(reader)
            factory = functools.partial(_same, protocol)
            read_transport, _ = await loop.connect_read_pipe(factory, pipe)
            transports.append(read_transport)
            readers.append(reader)
        write_transport, flow = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, popen.stdin
        )
        transports.append(write_transport)
        stdin = asyncio.StreamWriter(write_transport, flow, None, loop)
    except BaseException:
        popen.kill()
        for transport in transports:
            transport.close()
        await asyncio.to_thread(popen.wait)
        raise
    return Child(popen, stdin, readers[0], readers[1], _exit_future(popen), tuple(transports))
