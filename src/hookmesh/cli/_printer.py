"""Printing a reply's events for people (compact) or programs (JSON lines, docs/chat.md)."""

from __future__ import annotations

import json
from typing import Any

from google.protobuf import json_format
from rich.console import Console
from rich.markup import escape

from hookmesh.schema import (
    AgentEvent,
    CustomEvent,
    DataBlockDeltaEvent,
    DataBlockEndEvent,
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
    event_to_proto,
)


def event_json(event: AgentEvent) -> dict[str, Any]:
    """The JSON line of an event, as both `hookmesh chat --json` and Node's chat.js print it:
    ``type`` (the oneof arm), the event's own fields, then the arm's fields, in the proto3
    JSON mapping with proto field names (enums by name, bytes in base64, defaults included,
    unset messages left out)."""
    pb = event_to_proto(event)
    arm = pb.WhichOneof("event")
    out = json_format.MessageToDict(
        pb, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    body = out.pop(arm or "", {})
    return {"type": arm, **out, **body}


class EventPrinter:
    """Streams answer text as it arrives and shows everything else on one short line; lines
    that arrive while a text block streams wait for its end, so they never split a sentence.
    Output is never hard-wrapped (it may be piped)."""

    def __init__(self, console: Console | None = None, *, as_json: bool = False) -> None:
        self.console = console or Console(highlight=False, soft_wrap=True)
        self.as_json = as_json
        self._calls: dict[str, str] = {}
        self._results: dict[str, list[str]] = {}
        self._data: dict[str, list[Any]] = {}
        self._midline = False
        self._pending: list[str] = []
        self._thinking: list[str] = []

    def _line(self, text: str) -> None:
        if self._midline:
            self._pending.append(text)
        else:
            self.console.print(text)

    def flush(self) -> None:
        """End a text line left open and print the lines that waited for it."""
        if self._midline:
            self.console.print()
            self._midline = False
        for text in self._pending:
            self.console.print(text)
        self._pending.clear()

    def show(self, event: AgentEvent) -> None:
        """Print one event."""
        if self.as_json:
            print(json.dumps(event_json(event), ensure_ascii=False), flush=True)
            return
        if event.source_path:
            self._nested(event)
            return
        match event:
            case TextBlockDeltaEvent(delta=delta):
                self.console.out(delta, end="", highlight=False)
                self._midline = True
            case TextBlockEndEvent():
                self.flush()
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
            case DataBlockStartEvent(block_id=block_id, media_type=media_type, name=name):
                self._data[block_id] = [media_type, name, 0]
            case DataBlockDeltaEvent(block_id=block_id, data=data) if block_id in self._data:
                self._data[block_id][2] += len(data)
            case DataBlockEndEvent(block_id=block_id) if block_id in self._data:
                media_type, name, size = self._data.pop(block_id)
                label = escape(f"[data {media_type}{' ' + name if name else ''}]")
                self._line(f"[blue]  {label}[/blue] {size} bytes")
            case ModelCallEndEvent(model_name=model, usage=usage) if usage is not None:
                tokens = f"{usage.input_tokens} in / {usage.output_tokens} out"
                self._line(f"[dim]  model {escape(model)}: {tokens}[/dim]")
            case ReplyStartEvent(reply_id=reply_id, session_id=session_id):
                self._line(f"[dim]reply {reply_id[:8]} · session {escape(session_id)}[/dim]")
            case ReplyEndEvent(finish_reason=reason, error=error, output=output):
                self.flush()
                if output is not None:
                    label = escape(f"[output {output.schema_name}]")
                    # NOTE(chat): keys sorted, as chat.js prints them: a Struct keeps no order.
                    value = json.dumps(
                        output.as_json(), ensure_ascii=False, separators=(",", ":"), sort_keys=True
                    )
                    self._line(f"[bold]{label}[/bold] {escape(value)}")
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
            case RequireUserConfirmEvent(tool_calls=calls):
                for call in calls:
                    asked = escape(f"{call.name} {_short(call.arguments)}")
                    self._line(f"[yellow]    {who} asks to confirm {asked}[/yellow]")
            case ReplyEndEvent(finish_reason=reason):
                self._line(f"[dim]    {who} ended: {reason}[/dim]")


def _short(text: Any, limit: int = 160) -> str:
    text = str(text).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"
