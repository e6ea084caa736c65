"""Tools the agent-service tests load by import path (the service runs in the test's process)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from hookmesh.agent import tool
from hookmesh.services.agent import load_config, start_agent_service


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


@asynccontextmanager
async def confirming_service(tmp_path: Path) -> AsyncIterator[str]:
    """A live agent service whose model asks to delete /tmp/x (a call that needs the user's
    confirmation), then answers "done"; yields its address."""
    config = load_config(
        None,
        store=f"sqlite:///{tmp_path}/agent.db",
        tools=["tests.service_tools:delete_file"],
        models={
            "default": {
                "type": "scripted",
                "turns": [
                    {"tool_calls": [{"name": "delete_file", "arguments": {"path": "/tmp/x"}}]},
                    "done",
                ],
            }
        },
    )
    service = await start_agent_service(config, address="127.0.0.1:0")
    try:
        yield f"127.0.0.1:{service.port}"
    finally:
        await service.stop(None)


@tool(name="long_report", read_only=True)
def long_report() -> str:
    """A report longer than the reduction tests' limit, so it is offloaded."""
    return "report line\n" * 40
