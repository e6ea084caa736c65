"""What tool-contributing middlewares with connections share: an ``async with`` lifecycle, a
finished tool output as result events, and its text."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from types import TracebackType
from typing import Self

from hookmesh.schema import AgentEvent, ToolOutputBlock, ToolResultDeltaEvent, ToolResultEndEvent


class Lifecycle:
    """``async with`` for a middleware with `start` and `aclose` (the agent service and
    ``hookmesh sidecar`` call them itself)."""

    async def start(self) -> None:
        """Open what the middleware needs before its first reply."""

    async def aclose(self) -> None:
        """Close it."""

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        unused_type: type[BaseException] | None,
        unused_exc: BaseException | None,
        unused_tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def output_text(output: Sequence[ToolOutputBlock]) -> str:
    """The text of a tool output: its text blocks joined by newlines (media left out)."""
    return "\n".join(b.text for b in output if b.type == "text")


def output_events(
    reply_id: str, call_id: str, output: Sequence[ToolOutputBlock], ok: bool
) -> Iterator[AgentEvent]:
    """A tool's finished output as its delta events (text, or one media item each) and the
    end event (success, or error)."""
    for block in output:
        if block.type == "text":
            yield ToolResultDeltaEvent(reply_id=reply_id, call_id=call_id, text=block.text)
        else:
            yield ToolResultDeltaEvent(reply_id=reply_id, call_id=call_id, media=block)
    yield ToolResultEndEvent(reply_id=reply_id, call_id=call_id, state="success" if ok else "error")
