"""Printing a reply's events for people (compact) or programs (JSON lines)."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.markup import escape

from hookmesh.schema import (
    AgentEvent,
    CustomEvent,
    DataBlockStartEvent,
    HintBlockEvent,
    ModelCallEndEvent,
    ReasoningBlockDeltaEvent,
    ReasoningBlockEndEvent,
    ReplyEndEvent,
    ReplyStartEvent,
    RequireExternalExecutionEvent,
    RequireUserConfirmEvent,
    TextBlockDeltaEvent,
    TextBlockEndEvent,
    ToolCallStartEvent,
    ToolResultDeltaEvent,
    ToolResultEndEvent,
)


class EventPrinter:
    """Streams answer text as it arrives and shows everything else on one short line."""

    def __init__(self, console: Console | None = None, *, as_json: bool = False) -> None:
        self.console = console or Console(highlight=False)
        self.as_json = as_json
        self._calls: dict[str, str] = {}
        self._results: dict[str, list[str]] = {}
        self._midline = False
        self._thinking: list[str] = []

    def _line(self, text: str) -> None:
        if self._midline:
            self.console.print()
            self._midline = False
        self.console.print(text)

    def show(self, event: AgentEvent) -> None:
        """Print one event."""
        if self.as_json:
            self.console.out(event.model_dump_json(exclude_none=True), highlight=False)
            return
        if event.source_path:
            self._nested(event)
            return
        match event:
            case TextBlockDeltaEvent(delta=delta):
                self.console.out(delta, end="", highlight=False)
                self._midline = True
            case TextBlockEndEvent() if self._midline:
                self.console.print()
                self._midline = False
            case ReasoningBlockDeltaEvent(delta=delta):
                self._thinking.append(delta)
            case ReasoningBlockEndEvent():
                self._line(f"[dim]  (thinking) {escape(_short(''.join(self._thinking)))}[/dim]")
                self._thinking = []
            case ToolCallStartEvent(call_id=call_id, name=name):
                self._calls[call_id] = name
                self._line(f"[cyan]  → {escape(name)}[/cyan] [dim]({escape(call_id)})[/dim]")
            case ToolResultDeltaEvent(call_id=call_id, text=text):
                self._results.setdefault(call_id, []).append(text)
            case ToolResultEndEvent(call_id=call_id, state=state):
                name = escape(self._calls.get(call_id, "tool"))
                text = escape(_short("".join(self._results.pop(call_id, []))))
                self._line(f"[green]  ← {name}[/green] {state}: {text}")
            case CustomEvent(name=name, value=value):
                label = escape(f"[{name}]")
                self._line(f"[magenta]  {label}[/magenta] {escape(_short(json.dumps(value)))}")
            case HintBlockEvent(source=source, text=text):
                label = escape(f"[hint from {source}]")
                self._line(f"[yellow]  {label}[/yellow] {escape(_short(text))}")
            case (
                RequireUserConfirmEvent(tool_calls=calls)
                | RequireExternalExecutionEvent(tool_calls=calls)
            ):
                names = escape(", ".join(c.name for c in calls))
                self._line(f"[yellow]  paused: {event.type.replace('_', ' ')}: {names}[/yellow]")
            case DataBlockStartEvent(media_type=media_type):
                self._line(f"[blue]  {escape(f'[data {media_type}]')}[/blue]")
            case ModelCallEndEvent(model_name=model, usage=usage) if usage is not None:
                tokens = f"{usage.input_tokens} in / {usage.output_tokens} out"
                self._line(f"[dim]  model {escape(model)}: {tokens}[/dim]")
            case ReplyStartEvent(reply_id=reply_id, session_id=session_id):
                self._line(f"[dim]reply {reply_id[:8]} · session {escape(session_id)}[/dim]")
            case ReplyEndEvent(finish_reason=reason, error=error):
                detail = escape(f" — {error.reason}: {error.message}") if error else ""
                self._line(f"[dim]end: {reason}{detail}[/dim]")

    def _nested(self, event: AgentEvent) -> None:
        """A nested run's progress: one dim line per tool call, answer and end."""
        path = "/".join(s.agent_name or s.tool_name for s in event.source_path or ())
        who = escape(f"[{path}]")
        match event:
            case TextBlockDeltaEvent(block_id=block_id, delta=delta):
                self._results.setdefault(f"nested:{block_id}", []).append(delta)
            case TextBlockEndEvent(block_id=block_id):
                text = escape(_short("".join(self._results.pop(f"nested:{block_id}", []))))
                self._line(f"[dim]    {who} {text}[/dim]")
            case ToolCallStartEvent(name=name):
                self._line(f"[dim]    {who} → {escape(name)}[/dim]")
            case ReplyEndEvent(finish_reason=reason):
                self._line(f"[dim]    {who} ended: {reason}[/dim]")


def _short(text: Any, limit: int = 160) -> str:
    text = str(text).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"
