"""Hypothesis strategies for the hookmesh schema: content blocks, both message kinds, events.

Values stay inside what the protobuf encoding carries exactly: JSON numbers are integers
within ±2**53 or finite floats (a `Struct` holds doubles; ``1 == 1.0`` keeps model equality),
datetimes are timezone-aware UTC with microsecond precision, and text is any string without
surrogates (protobuf strings are UTF-8).

Block and event strategies take ``valid``: with ``valid=True`` they satisfy
`hookmesh.schema.message_violations` (required ids, names, mime types and URLs set); with
``valid=False`` those may be empty too, which the codecs must still carry. Message
strategies always produce valid messages.
"""

from __future__ import annotations

from datetime import UTC
from typing import Any, get_args

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from hookmesh.schema import (
    EVENT_TYPES,
    AgenticMessage,
    AgenticRole,
    AudioBlock,
    CustomEvent,
    DataBlockDeltaEvent,
    DataBlockEndEvent,
    DataBlockStartEvent,
    DocumentBlock,
    EventSource,
    FinishReason,
    FlatMessage,
    FlatRole,
    HintBlock,
    HintBlockEvent,
    ImageBlock,
    InlineSource,
    ModelCallEndEvent,
    ModelCallStartEvent,
    ReasoningBlock,
    ReasoningBlockDeltaEvent,
    ReasoningBlockEndEvent,
    ReasoningBlockStartEvent,
    ReplyEndEvent,
    ReplyError,
    ReplyStartEvent,
    RequireExternalExecutionEvent,
    RequireUserConfirmEvent,
    StructuredOutput,
    TextBlock,
    TextBlockDeltaEvent,
    TextBlockEndEvent,
    TextBlockStartEvent,
    ToolCall,
    ToolCallBlock,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    ToolResultBlock,
    ToolResultDeltaEvent,
    ToolResultEndEvent,
    ToolResultStartEvent,
    ToolResultState,
    UrlSource,
    Usage,
    VideoBlock,
)

_MAX_TEXT = 24
_MAX_LIST = 3
_INT64 = (-(2**63), 2**63 - 1)
_JSON_INT = 2**53

# --- scalars -----------------------------------------------------------------------------

texts: SearchStrategy[str] = st.text(st.characters(codec="utf-8"), max_size=_MAX_TEXT)
"""Any text protobuf can carry (no surrogates)."""

non_empty_texts: SearchStrategy[str] = st.text(
    st.characters(codec="utf-8"), min_size=1, max_size=_MAX_TEXT
)
"""Any non-empty text."""

tool_result_states: SearchStrategy[ToolResultState] = st.sampled_from(get_args(ToolResultState))
"""Every tool result state."""

finish_reasons: SearchStrategy[FinishReason] = st.sampled_from(get_args(FinishReason))
"""Every finish reason."""

datetimes = st.datetimes(timezones=st.just(UTC))
"""Timezone-aware UTC datetimes, microsecond precision, years 1 to 9999."""

int64s: SearchStrategy[int] = st.integers(*_INT64)
"""Any protobuf int64."""

# --- JSON --------------------------------------------------------------------------------

json_numbers: SearchStrategy[int | float] = st.integers(-_JSON_INT, _JSON_INT) | st.floats(
    allow_nan=False, allow_infinity=False
)
"""Numbers a protobuf `Value` (a double) carries exactly."""

json_values: SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | json_numbers | texts,
    lambda inner: (
        st.lists(inner, max_size=_MAX_LIST) | st.dictionaries(texts, inner, max_size=_MAX_LIST)
    ),
    max_leaves=8,
)
"""Any JSON value (null, bool, number, string, list, object)."""

json_objects: SearchStrategy[dict[str, Any]] = st.dictionaries(
    texts, json_values, max_size=_MAX_LIST
)
"""A JSON object, as metadata holds."""

# --- blocks ------------------------------------------------------------------------------


def _required(valid: bool) -> SearchStrategy[str]:
    return non_empty_texts if valid else texts


def media_sources(*, valid: bool = True) -> SearchStrategy[InlineSource | UrlSource]:
    """Inline or URL sources; `valid` sets the inline mime type and the URL."""
    return st.one_of(
        st.builds(InlineSource, data=st.binary(max_size=48), mime_type=_required(valid)),
        st.builds(UrlSource, url=_required(valid), mime_type=texts),
    )


def text_blocks(*, non_empty: bool = False) -> SearchStrategy[TextBlock]:
    """Text blocks with any id."""
    return st.builds(TextBlock, text=non_empty_texts if non_empty else texts, id=texts)


def reasoning_blocks() -> SearchStrategy[ReasoningBlock]:
    """Reasoning blocks, with and without a signature."""
    return st.builds(ReasoningBlock, text=texts, signature=texts, id=texts)


_MEDIA_CLASSES = (ImageBlock, AudioBlock, VideoBlock, DocumentBlock)


def media_blocks(
    *, valid: bool = True, cls: type[Any] | None = None
) -> SearchStrategy[ImageBlock | AudioBlock | VideoBlock | DocumentBlock]:
    """Image, audio, video and document blocks (only `cls` when given)."""
    return st.one_of(
        *(
            st.builds(
                c,
                source=media_sources(valid=valid),
                name=texts,
                metadata=st.none() | json_objects,
                id=texts,
            )
            for c in ((cls,) if cls is not None else _MEDIA_CLASSES)
        )
    )


def tool_output_blocks(*, valid: bool = True) -> SearchStrategy[Any]:
    """What tool results and flat parts hold: text and media blocks."""
    return text_blocks() | media_blocks(valid=valid)


def tool_call_blocks(*, valid: bool = True) -> SearchStrategy[ToolCallBlock]:
    """Tool call blocks; `valid` sets call_id and name."""
    return st.builds(
        ToolCallBlock, call_id=_required(valid), name=_required(valid), arguments=texts, id=texts
    )


def tool_result_blocks(*, valid: bool = True) -> SearchStrategy[ToolResultBlock]:
    """Tool result blocks of every state; `valid` sets call_id."""
    return st.builds(
        ToolResultBlock,
        call_id=_required(valid),
        name=texts,
        output=st.lists(tool_output_blocks(valid=valid), max_size=_MAX_LIST),
        state=tool_result_states,
        id=texts,
    )


def hint_blocks() -> SearchStrategy[HintBlock]:
    """Hint blocks."""
    return st.builds(HintBlock, text=texts, source=texts, id=texts)


def block_strategies(*, valid: bool = True) -> dict[str, SearchStrategy[Any]]:
    """One strategy per content block type, keyed by its `type` tag."""
    return {
        "text": text_blocks(),
        "reasoning": reasoning_blocks(),
        "image": media_blocks(valid=valid, cls=ImageBlock),
        "audio": media_blocks(valid=valid, cls=AudioBlock),
        "video": media_blocks(valid=valid, cls=VideoBlock),
        "document": media_blocks(valid=valid, cls=DocumentBlock),
        "tool_call": tool_call_blocks(valid=valid),
        "tool_result": tool_result_blocks(valid=valid),
        "hint": hint_blocks(),
    }


def content_blocks(*, valid: bool = True) -> SearchStrategy[Any]:
    """Any content block."""
    return st.one_of(*block_strategies(valid=valid).values())


# --- messages ----------------------------------------------------------------------------

usages: SearchStrategy[Usage] = st.builds(
    Usage,
    input_tokens=int64s,
    output_tokens=int64s,
    cache_read_tokens=int64s,
    cache_creation_tokens=int64s,
    reasoning_tokens=int64s,
)
"""Token counts over the whole int64 range."""

tool_calls: SearchStrategy[ToolCall] = st.builds(
    ToolCall, id=non_empty_texts, name=non_empty_texts, arguments=texts
)
"""Valid flat tool calls (id and name set)."""

_common: dict[str, SearchStrategy[Any]] = {
    "id": texts,
    "metadata": st.none() | json_objects,
    "create_time": st.none() | datetimes,
    "name": texts,
    "usage": st.none() | usages,
}

_FLAT_ROLES: tuple[FlatRole, ...] = ("system", "user", "assistant", "tool")
_AGENTIC_ROLES: tuple[AgenticRole, ...] = ("system", "user", "assistant")


def _flat_parts(role: str) -> SearchStrategy[list[Any]]:
    # A system message holds text only, in both kinds.
    part = text_blocks() if role == "system" else tool_output_blocks()
    return st.lists(part, max_size=_MAX_LIST)


@st.composite
def flat_messages(
    draw: st.DrawFn, *, roles: tuple[FlatRole, ...] = _FLAT_ROLES, canonical: bool = False
) -> FlatMessage:
    """Valid flat messages of the given roles.

    Role-only fields follow the rules of `message_violations`: tool_calls and reasoning only
    on assistant messages, tool_call_id (non-empty) only on tool messages.

    ``canonical=True`` draws only the flat messages that flat → agentic → flat keeps as they
    are (see `is_canonical_flat`): when `content` is empty, `parts` does not start with a text
    block; and `tool_name` / `tool_result_state`, which only a tool message carries, are at
    their defaults on other roles.
    """
    role = draw(st.sampled_from(roles))
    fields: dict[str, Any] = {k: draw(v) for k, v in _common.items()}
    fields["content"] = draw(texts)
    parts = draw(_flat_parts(role))
    if canonical and not fields["content"] and parts and parts[0].type == "text":
        fields["content"] = draw(non_empty_texts)
    fields["parts"] = parts
    if role == "assistant":
        fields["tool_calls"] = draw(st.lists(tool_calls, max_size=_MAX_LIST))
        fields["reasoning_content"] = draw(texts)
    if role == "tool":
        fields["tool_call_id"] = draw(non_empty_texts)
    if role == "tool":
        fields["tool_name"] = draw(texts)
        fields["tool_result_state"] = draw(tool_result_states)
    return FlatMessage(role=role, **fields)


def is_canonical_flat(msg: FlatMessage) -> bool:
    """Whether flat → agentic → flat gives `msg` back (for a valid flat message).

    Canonical: when `content` is empty, `parts` does not start with a text block (that block
    would become `content`); a message whose role is not tool has the default `tool_name`
    ('') and `tool_result_state` ('success'), as the agentic kind has nowhere to keep them.
    """
    if not msg.content and msg.parts and msg.parts[0].type == "text":
        return False
    return msg.role == "tool" or (msg.tool_name == "" and msg.tool_result_state == "success")


_AGENTIC_BLOCKS: dict[str, SearchStrategy[Any]] = {
    "system": text_blocks() | hint_blocks(),
    "user": text_blocks() | hint_blocks() | media_blocks() | tool_result_blocks(),
    "assistant": text_blocks() | reasoning_blocks() | media_blocks() | tool_call_blocks(),
}


@st.composite
def agentic_messages(
    draw: st.DrawFn, *, roles: tuple[AgenticRole, ...] = _AGENTIC_ROLES
) -> AgenticMessage:
    """Valid agentic messages of the given roles, blocks in any order.

    System: text and hint; user: text, hint, media and tool_result (a user message may mix
    user content with several tool results); assistant: text, reasoning, media and tool_call.
    """
    role = draw(st.sampled_from(roles))
    fields: dict[str, Any] = {k: draw(v) for k, v in _common.items()}
    blocks = draw(st.lists(_AGENTIC_BLOCKS[role], max_size=4))
    return AgenticMessage(role=role, blocks=blocks, **fields)


def _first_text_maps(block: Any) -> bool:
    # A leading text block travels as flat `content`: only its text survives, and '' is dropped.
    return block.type != "text" or (block.text != "" and block.id == "")


def in_overlap(msg: AgenticMessage) -> bool:
    """Whether agentic → flat → agentic gives `msg` back (for a valid agentic message).

    The overlap is exactly the agentic messages shaped like a flat message:

    * a user message holding exactly one tool_result block (id '') and nothing else, whose
      output does not start with a text block that has an id or empty text; or
    * a message without tool_result and hint blocks whose blocks are, in this order: at most
      one reasoning block (non-empty text, no signature, id ''), then text and media blocks,
      the first of which, when it is text, has non-empty text and id '', then tool_call
      blocks (id '').
    """
    blocks = msg.blocks
    if any(b.type == "tool_result" for b in blocks):
        if len(blocks) != 1 or not isinstance(result := blocks[0], ToolResultBlock) or result.id:
            return False
        return not result.output or _first_text_maps(result.output[0])
    if any(b.type == "hint" for b in blocks):
        return False
    i = 0
    if blocks and blocks[0].type == "reasoning":
        r = blocks[0]
        if not r.text or r.signature or r.id:
            return False
        i = 1
    j = i
    while j < len(blocks) and blocks[j].type != "tool_call":
        if blocks[j].type == "reasoning":
            return False
        j += 1
    if j > i and not _first_text_maps(blocks[i]):
        return False
    return all(b.type == "tool_call" and not b.id for b in blocks[j:])


@st.composite
def overlap_messages(draw: st.DrawFn) -> AgenticMessage:
    """Valid agentic messages inside the overlap (see `in_overlap`)."""
    shape = draw(st.sampled_from(("system", "user", "assistant", "tool_result")))
    fields: dict[str, Any] = {k: draw(v) for k, v in _common.items()}
    if shape == "tool_result":
        result = draw(tool_result_blocks())
        if result.output and not _first_text_maps(result.output[0]):
            result.output[0] = TextBlock(text=draw(non_empty_texts))
        result.id = ""
        return AgenticMessage(role="user", blocks=[result], **fields)
    role: AgenticRole = (
        "system" if shape == "system" else "user" if shape == "user" else "assistant"
    )
    blocks: list[Any] = []
    if role == "assistant" and draw(st.booleans()):
        blocks.append(ReasoningBlock(text=draw(non_empty_texts)))
    content = text_blocks() if role == "system" else tool_output_blocks()
    body = draw(st.lists(content, max_size=_MAX_LIST))
    if body and not _first_text_maps(body[0]):
        body[0] = TextBlock(text=draw(non_empty_texts))
    blocks.extend(body)
    if role == "assistant":
        calls = draw(st.lists(tool_call_blocks(), max_size=_MAX_LIST))
        blocks.extend(c.model_copy(update={"id": ""}) for c in calls)
    return AgenticMessage(role=role, blocks=blocks, **fields)


def messages() -> SearchStrategy[FlatMessage | AgenticMessage]:
    """Valid messages of either kind."""
    return flat_messages() | agentic_messages()


# --- events ------------------------------------------------------------------------------

reply_errors: SearchStrategy[ReplyError] = st.builds(
    ReplyError,
    reason=texts,
    message=texts,
    source=texts,
    metadata=st.dictionaries(texts, texts, max_size=_MAX_LIST),
)
"""Reply errors with any metadata."""


def _tool_result_deltas(valid: bool) -> SearchStrategy[ToolResultDeltaEvent]:
    text = st.builds(ToolResultDeltaEvent, reply_id=texts, call_id=texts, text=texts)
    media = st.builds(
        ToolResultDeltaEvent, reply_id=texts, call_id=texts, media=media_blocks(valid=valid)
    )
    return text | media


def event_strategies(*, valid: bool = True) -> dict[str, SearchStrategy[Any]]:
    """One strategy per event type, keyed by its `type` tag (every tag in EVENT_TYPES)."""
    r = texts
    calls = st.lists(tool_calls, max_size=_MAX_LIST)
    out: dict[str, SearchStrategy[Any]] = {
        "reply_start": st.builds(ReplyStartEvent, reply_id=r, session_id=texts, agent_name=texts),
        "reply_end": st.builds(
            ReplyEndEvent,
            reply_id=r,
            finish_reason=finish_reasons,
            error=st.none() | reply_errors,
            session_id=texts,
            output=st.none() | st.builds(StructuredOutput, value=json_values, schema_name=texts),
        ),
        "model_call_start": st.builds(ModelCallStartEvent, reply_id=r, model_name=texts),
        "model_call_end": st.builds(
            ModelCallEndEvent,
            reply_id=r,
            model_name=texts,
            usage=st.none() | usages,
            stop_reason=texts,
            response_id=texts,
        ),
        "text_block_start": st.builds(TextBlockStartEvent, reply_id=r, block_id=texts),
        "text_block_delta": st.builds(TextBlockDeltaEvent, reply_id=r, block_id=texts, delta=texts),
        "text_block_end": st.builds(TextBlockEndEvent, reply_id=r, block_id=texts),
        "reasoning_block_start": st.builds(ReasoningBlockStartEvent, reply_id=r, block_id=texts),
        "reasoning_block_delta": st.builds(
            ReasoningBlockDeltaEvent, reply_id=r, block_id=texts, delta=texts
        ),
        "reasoning_block_end": st.builds(ReasoningBlockEndEvent, reply_id=r, block_id=texts),
        "tool_call_start": st.builds(ToolCallStartEvent, reply_id=r, call_id=texts, name=texts),
        "tool_call_delta": st.builds(ToolCallDeltaEvent, reply_id=r, call_id=texts, delta=texts),
        "tool_call_end": st.builds(ToolCallEndEvent, reply_id=r, call_id=texts),
        "tool_result_start": st.builds(ToolResultStartEvent, reply_id=r, call_id=texts, name=texts),
        "tool_result_delta": _tool_result_deltas(valid),
        "tool_result_end": st.builds(
            ToolResultEndEvent, reply_id=r, call_id=texts, state=tool_result_states
        ),
        "data_block_start": st.builds(
            DataBlockStartEvent, reply_id=r, block_id=texts, media_type=texts, name=texts
        ),
        "data_block_delta": st.builds(
            DataBlockDeltaEvent, reply_id=r, block_id=texts, data=st.binary(max_size=64)
        ),
        "data_block_end": st.builds(DataBlockEndEvent, reply_id=r, block_id=texts),
        "hint_block": st.builds(
            HintBlockEvent, reply_id=r, block_id=texts, text=texts, source=texts
        ),
        "require_user_confirm": st.builds(RequireUserConfirmEvent, reply_id=r, tool_calls=calls),
        "require_external_execution": st.builds(
            RequireExternalExecutionEvent, reply_id=r, tool_calls=calls
        ),
        "custom": st.builds(CustomEvent, reply_id=r, name=texts, value=json_values),
    }
    missing = set(EVENT_TYPES) ^ set(out)
    assert not missing, f"event strategies out of step with EVENT_TYPES: {sorted(missing)}"
    return {tag: _sourced(strategy) for tag, strategy in out.items()}


event_sources: SearchStrategy[EventSource] = st.builds(
    EventSource, call_id=texts, tool_name=texts, agent_name=texts, run_id=texts
)
"""One level of a nested event's path."""


def _sourced(events: SearchStrategy[Any]) -> SearchStrategy[Any]:
    """`events` as the reply's own (source None) or nested at any depth."""
    paths = st.none() | st.lists(event_sources, min_size=1, max_size=3)
    return st.tuples(events, paths).map(lambda pair: _with_source(*pair))


def _with_source(event: Any, path: list[EventSource] | None) -> Any:
    event.source_path = path
    return event


def events(*, valid: bool = True) -> SearchStrategy[Any]:
    """Any agent event."""
    return st.one_of(*event_strategies(valid=valid).values())
