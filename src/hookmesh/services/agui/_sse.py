"""The SSE response of a run: AG-UI events encoded by the official encoder, with keepalive
comments while the agent is silent."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from ag_ui.core import BaseEvent
from ag_ui.encoder import EventEncoder
from starlette.responses import StreamingResponse

_KEEPALIVE = ": keepalive\n\n"
_ENCODER = EventEncoder()


async def _with_keepalive(source: AsyncIterator[str], seconds: float) -> AsyncIterator[str]:
    """`source`, with an SSE comment whenever it is silent for `seconds` (a task reads it so
    a pause never cancels it; the bounded queue keeps gRPC flow control)."""
    queue: asyncio.Queue[str | BaseException | None] = asyncio.Queue(maxsize=64)

    async def pump() -> None:
        try:
            async for item in source:
                await queue.put(item)
        except Exception as exc:
            await queue.put(exc)
        else:
            await queue.put(None)

    task = asyncio.create_task(pump())
    try:
        while True:
            try:
                async with asyncio.timeout(seconds):
                    item = await queue.get()
            except TimeoutError:
                yield _KEEPALIVE
                continue
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def _encoded(events: AsyncIterator[BaseEvent]) -> AsyncIterator[str]:
    async for event in events:
        yield _ENCODER.encode(event)


def event_stream(events: AsyncIterator[BaseEvent], keepalive: float) -> StreamingResponse:
    """A ``text/event-stream`` response of `events`."""
    body = _with_keepalive(_encoded(events), keepalive)
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(body, media_type=_ENCODER.get_content_type(), headers=headers)
