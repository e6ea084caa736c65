"""Tools the agent-service tests load by import path (the service runs in the test's process)."""

from __future__ import annotations

import asyncio

from hookmesh.agent import tool


class GateState:
    """Events a test arms before a reply, so it can hold a tool open without sleeping."""

    started: asyncio.Event
    release: asyncio.Event

    @classmethod
    def reset(cls) -> None:
        cls.started = asyncio.Event()
        cls.release = asyncio.Event()


@tool(name="gate")
async def gate() -> str:
    """Wait until the test releases the gate."""
    GateState.started.set()
    await GateState.release.wait()
    return "released"


@tool(needs_confirmation=True)
def delete_file(path: str) -> str:
    """Delete a file (asks the user first).

    Args:
        path: Which file.
    """
    return f"deleted {path}"
