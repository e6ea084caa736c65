"""What tool-contributing middlewares with connections share: an ``async with`` lifecycle and
the text of a tool output."""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Self

from hookmesh.schema import ToolOutputBlock


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
