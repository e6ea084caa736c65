"""Kind-aware helpers: one algorithm over flat and agentic messages.

Middlewares ask these questions instead of looking at fields, so each is written once and
serves both kinds. The answers differ per kind: an agentic message has no tool role, so a
tool result is a `tool_result` block inside a user message (possibly next to user text).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from hookmesh.schema._blocks import (
    ContentBlock,
    HintBlock,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolOutputBlock,
    ToolResultBlock,
    ToolResultState,
)
from hookmesh.schema._messages import (
    AgenticMessage,
    AgenticRole,
    FlatMessage,
    Message,
    MessageKind,
    ToolCall,
)

HINT_METADATA_KEY = "hookmesh.hint"
"""Metadata key marking a flat message as a middleware hint (its value is the source)."""
EDITED_CALLS_METADATA_KEY = "hookmesh.edited_tool_calls"
"""Assistant message metadata: ``{call_id: the model's original arguments}`` for each call
whose arguments a person edited before it ran (see `edit_tool_call`)."""

_CHARS_PER_TOKEN = 4
_MESSAGE_OVERHEAD_TOKENS = 4
_MEDIA_TOKENS = 256


@dataclass(slots=True)
class ToolResult:
    """A tool result read from a message of either kind."""

    call_id: str
    name: str
    output: list[ToolOutputBlock] = field(default_factory=list)
    state: ToolResultState = "success"

    @property
    def text(self) -> str:
        """The text of the output, text blocks joined by newlines."""
        return "\n".join(b.text for b in self.output if b.type == "text")


def is_system(msg: Message) -> bool:
    """A system (instructions) message."""
    return msg.role == "system"


def is_assistant(msg: Message) -> bool:
    """A model message."""
    return msg.role == "assistant"


def is_user(msg: Message) -> bool:
    """A user turn with content of its own (not only tool results, not a hint)."""
    if msg.role != "user":
        return False
    if msg.kind == "flat":
        return not is_hint(msg)
    # NOTE: an empty user message is a user turn in both kinds.
    return not msg.blocks or any(b.type not in ("tool_result", "hint") for b in msg.blocks)


def is_tool_result(msg: Message) -> bool:
    """A message carrying at least one tool result (flat: role tool)."""
    if msg.kind == "flat":
        return msg.role == "tool"
    return msg.role == "user" and any(b.type == "tool_result" for b in msg.blocks)


def is_hint(msg: Message) -> bool:
    """A middleware hint message (see `make_hint`)."""
    if msg.kind == "flat":
        return msg.metadata is not None and HINT_METADATA_KEY in msg.metadata
    return bool(msg.blocks) and all(b.type == "hint" for b in msg.blocks)


def text_of(msg: Message) -> str:
    """The message's text (flat: content and text parts; agentic: text blocks), newline-joined.

    Reasoning, tool calls and tool results are not text (for both kinds: a flat tool
    message has none; read results with `tool_results`); hints are.
    """
    if msg.kind == "flat":
        if msg.role == "tool":
            return ""
        if not msg.parts:  # the common case, on hot paths (input checks): no list, no join
            return msg.content
        texts = [msg.content] if msg.content else []
        texts.extend(p.text for p in msg.parts if p.type == "text")
        return "\n".join(texts)
    return "\n".join(b.text for b in msg.blocks if b.type in ("text", "hint"))


def reasoning_of(msg: Message) -> str:
    """The message's reasoning text ('' when none)."""
    if msg.kind == "flat":
        return msg.reasoning_content
    return "".join(b.text for b in msg.blocks if b.type == "reasoning")


def tool_calls(msg: Message) -> list[ToolCall]:
    """The tool calls an assistant message makes, in order (empty for other messages)."""
    if msg.kind == "flat":
        return list(msg.tool_calls)
    return [
        ToolCall(id=b.call_id, name=b.name, arguments=b.arguments)
        for b in msg.blocks
        if b.type == "tool_call"
    ]


def tool_results(msg: Message) -> list[ToolResult]:
    """The tool results a message carries, in order (empty for other messages)."""
    if msg.kind == "flat":
        if msg.role != "tool":
            return []
        output: list[ToolOutputBlock] = [TextBlock(text=msg.content)] if msg.content else []
        output.extend(msg.parts)
        return [ToolResult(msg.tool_call_id, msg.tool_name, output, msg.tool_result_state)]
    return [
        ToolResult(b.call_id, b.name, list(b.output), b.state)
        for b in msg.blocks
        if b.type == "tool_result"
    ]


def _output(output: str | Sequence[ToolOutputBlock]) -> list[ToolOutputBlock]:
    if isinstance(output, str):
        return [TextBlock(text=output)] if output else []
    return list(output)


def make_tool_result(
    kind: MessageKind,
    call_id: str,
    name: str,
    output: str | Sequence[ToolOutputBlock],
    state: ToolResultState = "success",
    *,
    id: str = "",
) -> Message:
    """A message answering one tool call: flat role tool, or agentic user + tool_result."""
    blocks = _output(output)
    if kind == "flat":
        content = ""
        if blocks and isinstance(first := blocks[0], TextBlock):
            content = first.text
            del blocks[0]
        return FlatMessage(
            id=id,
            role="tool",
            content=content,
            parts=blocks,
            tool_call_id=call_id,
            tool_name=name,
            tool_result_state=state,
        )
    return AgenticMessage(
        id=id,
        role="user",
        blocks=[ToolResultBlock(call_id=call_id, name=name, output=blocks, state=state)],
    )


def make_text(
    kind: MessageKind, role: AgenticRole, text: str, *, id: str = "", name: str = ""
) -> Message:
    """A text message of `role` (system, user or assistant) in the given kind."""
    if kind == "flat":
        return FlatMessage(id=id, role=role, content=text, name=name)
    return AgenticMessage(id=id, role=role, blocks=[TextBlock(text=text)], name=name)


def make_user_text(kind: MessageKind, text: str, *, id: str = "") -> Message:
    """A user text message in the given kind."""
    return make_text(kind, "user", text, id=id)


def make_assistant(
    kind: MessageKind,
    text: str = "",
    calls: Iterable[ToolCall] = (),
    *,
    reasoning: str = "",
    blocks: Sequence[ToolOutputBlock] = (),
    id: str = "",
    name: str = "",
) -> Message:
    """An assistant message with optional reasoning, text, more text and media `blocks`, and
    tool calls, in that order.

    Flat: `blocks` become the parts (a leading text block the content when `text` is empty,
    as `to_flat` writes it); agentic: they follow the text block.
    """
    calls = list(calls)
    rest = _output(blocks)
    if kind == "flat":
        if not text and rest and isinstance(first := rest[0], TextBlock):
            text = first.text
            del rest[0]
        return FlatMessage(
            id=id,
            role="assistant",
            content=text,
            parts=rest,
            tool_calls=calls,
            reasoning_content=reasoning,
            name=name,
        )
    content: list[ContentBlock] = []
    if reasoning:
        content.append(ReasoningBlock(text=reasoning))
    if text:
        content.append(TextBlock(text=text))
    content.extend(rest)
    content.extend(ToolCallBlock(call_id=c.id, name=c.name, arguments=c.arguments) for c in calls)
    return AgenticMessage(id=id, role="assistant", blocks=content, name=name)


def make_hint(kind: MessageKind, text: str, source: str, *, id: str) -> Message:
    """A hint for the model from `source`, as its own user-role message with id `id`.

    Agentic: one hint block (id `id`); flat: user text tagged in metadata. Either way the
    middleware removes it later by message id.
    """
    if kind == "flat":
        return FlatMessage(id=id, role="user", content=text, metadata={HINT_METADATA_KEY: source})
    return AgenticMessage(id=id, role="user", blocks=[HintBlock(text=text, source=source, id=id)])


def edit_tool_call(msg: Message, call_id: str, arguments: str) -> bool:
    """Give call `call_id` of assistant message `msg` new arguments, in place, keeping the
    first original in metadata (`EDITED_CALLS_METADATA_KEY`). False when `msg` has no
    such call."""
    if msg.kind == "flat":
        calls = msg.tool_calls
        index = next((i for i, c in enumerate(calls) if c.id == call_id), -1)
        if index < 0:
            return False
        original = calls[index].arguments
        calls[index] = calls[index].model_copy(update={"arguments": arguments})
    else:
        block = next(
            (b for b in msg.blocks if b.type == "tool_call" and b.call_id == call_id), None
        )
        if block is None:
            return False
        original = block.arguments  # type: ignore[union-attr]
        block.arguments = arguments  # type: ignore[union-attr]
    edited = dict((msg.metadata or {}).get(EDITED_CALLS_METADATA_KEY) or {})
    edited.setdefault(call_id, original)
    msg.metadata = {**(msg.metadata or {}), EDITED_CALLS_METADATA_KEY: edited}
    return True


def unanswered_tool_calls(messages: Sequence[Message]) -> list[ToolCall]:
    """Tool calls (in order) that no later message answers."""
    answered: set[str] = set()
    pending: list[ToolCall] = []
    for msg in reversed(messages):
        for result in tool_results(msg):
            answered.add(result.call_id)
        if msg.role == "assistant":
            pending.extend(c for c in reversed(tool_calls(msg)) if c.id not in answered)
    pending.reverse()
    return pending


def estimate_tokens(messages: Message | Iterable[Message]) -> int:
    """A cheap token estimate: characters / 4, plus a fixed cost per message and media item."""
    if isinstance(messages, FlatMessage | AgenticMessage):
        messages = (messages,)
    total = 0
    for msg in messages:
        chars = 0
        media = 0
        if msg.kind == "flat":
            chars += len(msg.content) + len(msg.reasoning_content)
            chars += sum(len(c.name) + len(c.arguments) for c in msg.tool_calls)
            for p in msg.parts:
                if p.type == "text":
                    chars += len(p.text)
                else:
                    media += 1
        else:
            for b in msg.blocks:
                if isinstance(b, TextBlock | ReasoningBlock | HintBlock):
                    chars += len(b.text)
                elif b.type == "tool_call":
                    chars += len(b.name) + len(b.arguments)
                elif b.type == "tool_result":
                    for o in b.output:
                        if o.type == "text":
                            chars += len(o.text)
                        else:
                            media += 1
                else:
                    media += 1
        total += _MESSAGE_OVERHEAD_TOKENS + chars // _CHARS_PER_TOKEN + media * _MEDIA_TOKENS
    return total


def map_text(
    msg: Message,
    change: Callable[[str], str],
    *,
    only: Literal["all", "own", "tool_results"] = "all",
) -> Message:
    """`msg` with `change` applied to the texts it carries: text and hint blocks, reasoning,
    and tool results' text (flat: content, text parts, reasoning; agentic: text, reasoning,
    hint and tool_result text blocks). Tool call arguments and media are left alone.

    `only`: ``own`` skips the tool results (a flat tool message, an agentic message's
    tool_result blocks), ``tool_results`` takes only them. The same object when nothing
    changed; else a copy in which only what changed is new (unchanged blocks are shared)."""

    def apply(text: str) -> str:
        return change(text) if text else text

    def blocks_of(blocks: Sequence[Any], in_result: bool) -> list[Any] | None:
        out: list[Any] | None = None
        for i, block in enumerate(blocks):
            new = block
            if isinstance(block, ToolResultBlock):
                output = blocks_of(block.output, True) if only != "own" else None
                if output is not None:
                    new = block.model_copy(update={"output": output})
            elif isinstance(block, TextBlock | ReasoningBlock | HintBlock) and (
                in_result or only != "tool_results"
            ):
                text = apply(block.text)
                if text != block.text:
                    new = block.model_copy(update={"text": text})
            if new is not block:
                out = out if out is not None else list(blocks)
                out[i] = new
        return out

    if msg.kind == "agentic":
        blocks = blocks_of(msg.blocks, False)
        return msg if blocks is None else msg.model_copy(update={"blocks": blocks})
    result = is_tool_result(msg)
    if only == ("tool_results" if not result else "own"):
        return msg
    update: dict[str, Any] = {}
    for name in ("content", "reasoning_content"):
        text = apply(getattr(msg, name))
        if text != getattr(msg, name):
            update[name] = text
    parts = blocks_of(msg.parts, result)
    if parts is not None:
        update["parts"] = parts
    return msg.model_copy(update=update) if update else msg


def copy_message(msg: Message) -> Message:
    """A deep copy: changes to the copy never reach the original."""
    return msg.model_copy(deep=True)
