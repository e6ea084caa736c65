"""Small helpers shared by the agent tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from hookmesh.agent import tool
from hookmesh.schema import AgentEvent, CustomEvent

SHORT_TIMEOUT = 10.0


@tool(read_only=True)
def echo(text: str) -> str:
    """Say the text back.

    Args:
        text: What to say.
    """
    return text


async def collect(
    stream: AsyncIterator[AgentEvent], timeout: float = SHORT_TIMEOUT
) -> list[AgentEvent]:
    """Every event of a reply, within a deadline."""
    async with asyncio.timeout(timeout):
        return [event async for event in stream]


def types(events: list[AgentEvent]) -> list[str]:
    """The event tags, in order."""
    return [e.type for e in events]


def customs(events: list[AgentEvent]) -> list[CustomEvent]:
    """The custom events, in order."""
    return [e for e in events if isinstance(e, CustomEvent)]


def report(events: list[AgentEvent], key: str) -> dict[str, Any]:
    """The state a `Reporting` middleware emitted before reply_end."""
    found = [e.value for e in customs(events) if e.name == f"report:{key}"]
    assert len(found) == 1, f"expected one report from {key}, got {len(found)}"
    return found[0]  # type: ignore[no-any-return]
