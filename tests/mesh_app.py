"""Scale-out test parts: a gate that holds replies in flight until the test opens it, and the
middlewares that wait at it (importable by agent configs and sidecars as `tests.mesh_app:X`).

A waiter connects to the gate's Unix socket, sends its process id and waits for a line: the
test knows how many replies are in flight in which process, and releases them at once.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from hookmesh.agent import Agent
from hookmesh.middleware import Middleware
from hookmesh.schema import AgentEvent, CustomEvent, text_of

GATE_ENV = "MESH_GATE"
"""Environment variable naming the gate's socket, for middlewares served by a sidecar."""
PARK = "park"
"""The user text of a reply that `GateMiddleware` holds."""


async def wait_at_gate(path: str) -> None:
    """Report this process at the gate and wait until the test opens it (or goes away)."""
    reader, writer = await asyncio.open_unix_connection(path)
    try:
        writer.write(f"{os.getpid()}\n".encode())
        await writer.drain()
        await reader.readline()
    finally:
        writer.close()


class Gate:
    """The test's side: a Unix socket server that holds waiters while closed.

    Args:
        path: Where the socket goes (a short path: Unix sockets allow ~100 bytes).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.arrivals: list[int] = []
        """The process id of every waiter so far, in arrival order."""
        self._opened = asyncio.Event()
        self._arrived = asyncio.Condition()
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> Gate:
        self._server = await asyncio.start_unix_server(self._serve, str(self.path))
        return self

    async def __aexit__(self, *unused: object) -> None:
        self._opened.set()
        if self._server is not None:
            self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            pid = int((await reader.readline()).decode() or 0)
            async with self._arrived:
                self.arrivals.append(pid)
                self._arrived.notify_all()
            await self._opened.wait()
            writer.write(b"go\n")
            await writer.drain()
        except (ConnectionError, ValueError):
            pass  # the waiter's process died: nothing to release
        finally:
            writer.close()

    async def wait_for(self, count: int, timeout: float) -> list[int]:
        """Wait until `count` waiters have arrived in all; returns their process ids."""
        async with asyncio.timeout(timeout), self._arrived:
            await self._arrived.wait_for(lambda: len(self.arrivals) >= count)
            return list(self.arrivals)

    def open(self) -> None:
        """Release every waiter, now and later."""
        self._opened.set()

    def close(self) -> None:
        """Hold waiters from now on."""
        self._opened = asyncio.Event()


class GateMiddleware(Middleware):
    """Holds a reply whose last input is the text ``park`` after its first event has gone to
    the client (the reply is in flight), until the gate opens.

    Args:
        path: The gate's socket.
    """

    def __init__(self, path: str) -> None:
        self.path = path

    async def on_reply(
        self, agent: Agent, kwargs: dict[str, Any], next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        inputs = kwargs.get("inputs") or ()
        parked = bool(inputs) and text_of(inputs[-1]) == PARK
        async for event in next_handler():
            yield event
            if parked:
                parked = False
                await wait_at_gate(self.path)


class GatedPromptMiddleware(Middleware):
    """For a sidecar behind a proxy: its system-prompt hook (a unary call) waits at the gate
    named by ``MESH_GATE``; its model-call hook (on the Intercept stream) emits a
    ``sidecar`` event carrying the sidecar's process id."""

    async def on_system_prompt(self, agent: Agent, prompt: str) -> str:
        await wait_at_gate(os.environ[GATE_ENV])
        return prompt

    async def on_model_call(self, agent: Agent, kwargs: dict[str, Any], next_handler: Any) -> Any:
        agent.emit(CustomEvent(reply_id=agent.reply_id, name="sidecar", value=os.getpid()))
        return await next_handler()


class PythonTag(Middleware):
    """Marks every model call it wraps with a ``served_by`` event ``python`` (the Node
    sidecar's counterpart emits ``node.tokens``)."""

    def middleware_key(self) -> str:
        return "python-tag"

    async def on_model_call(self, agent: Agent, kwargs: dict[str, Any], next_handler: Any) -> Any:
        agent.emit(CustomEvent(reply_id=agent.reply_id, name="served_by", value="python"))
        return await next_handler()
