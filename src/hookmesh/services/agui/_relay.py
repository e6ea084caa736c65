"""An agent's event stream relayed as one run's AG-UI events, always ending well-formed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from ag_ui.core import BaseEvent, Message
from pydantic import TypeAdapter, ValidationError

from hookmesh.client import AgentClientError
from hookmesh.schema import AgentEvent
from hookmesh.services.agui._events import RunEvents

_MESSAGES = TypeAdapter(list[Message])


def messages_snapshot(messages: list[Any]) -> list[Any] | None:
    """`messages` for a MESSAGES_SNAPSHOT, when they are valid AG-UI messages (the snapshot
    only makes a stream that continues a reply self-contained; it is skipped otherwise)."""
    try:
        return _MESSAGES.validate_python(messages)
    except ValidationError:
        return None


async def relay(
    events: RunEvents,
    state: dict[str, Any],
    snapshot: list[Any] | None,
    first: AgentEvent | None,
    stream: Any,
) -> AsyncIterator[BaseEvent]:
    """RUN_STARTED and the snapshots, `first` (the event already read, if any) and the rest
    of `stream` mapped, then RUN_ERROR when the stream failed or ended before its reply did;
    `stream` is closed at the end (a client that went away cancels the agent call)."""
    try:
        for event in events.start(state, snapshot):
            yield event
        for event in events.map(first) if first is not None else ():
            yield event
        try:
            async for agent_event in stream:
                for event in events.map(agent_event):
                    yield event
        except AgentClientError as exc:
            for event in events.fail(exc.message, exc.reason or exc.code.name):
                yield event
        if not events.finished:
            for event in events.fail("the agent's stream ended early", "INCOMPLETE_REPLY"):
                yield event
    finally:
        await stream.aclose()
