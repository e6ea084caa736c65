"""Flat ⇄ agentic conversion: lossless where the kinds overlap, and what does not map."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings

from hookmesh.schema import (
    HINT_METADATA_KEY,
    AgenticMessage,
    AudioBlock,
    DocumentBlock,
    FlatMessage,
    HintBlock,
    ImageBlock,
    InlineSource,
    ReasoningBlock,
    TextBlock,
    ToolCall,
    ToolCallBlock,
    ToolResultBlock,
    UrlSource,
    Usage,
    VideoBlock,
    agentic_to_flat,
    flat_to_agentic,
    is_hint,
    make_hint,
    message_violations,
    to_agentic,
    to_flat,
    to_kind,
)
from tests import strategies as hs

_COMMON: dict[str, Any] = {
    "id": "m1",
    "metadata": {"topic": "cats", "n": 2},
    "create_time": datetime(2025, 5, 1, 12, 30, 15, 250_000, tzinfo=UTC),
    "name": "ada",
    "usage": Usage(input_tokens=10, output_tokens=5, reasoning_tokens=2),
}
_MEDIA: list[Any] = [
    ImageBlock(source=InlineSource(data=b"\x89PNG", mime_type="image/png"), id="i1"),
    AudioBlock(source=UrlSource(url="https://example.com/a.wav"), name="a.wav"),
    VideoBlock(source=UrlSource(url="gs://b/v.mp4", mime_type="video/mp4"), metadata={"s": 3}),
    DocumentBlock(source=InlineSource(data=b"%PDF", mime_type="application/pdf"), name="r.pdf"),
]
_CALLS = [ToolCall(id="c1", name="search", arguments='{"q": "x"}'), ToolCall(id="c2", name="t")]


def _call_blocks(calls: list[ToolCall]) -> list[ToolCallBlock]:
    return [ToolCallBlock(call_id=c.id, name=c.name, arguments=c.arguments) for c in calls]


# --- the mapping -------------------------------------------------------------------------


def test_tool_calls_map_to_tool_call_blocks() -> None:
    flat = FlatMessage(role="assistant", content="let me look", tool_calls=_CALLS, **_COMMON)
    agentic = AgenticMessage(
        role="assistant", blocks=[TextBlock(text="let me look"), *_call_blocks(_CALLS)], **_COMMON
    )
    assert flat_to_agentic(flat) == agentic
    assert agentic_to_flat(agentic) == [flat]


@pytest.mark.parametrize("state", ["success", "error", "interrupted", "denied"])
def test_tool_role_maps_to_a_tool_result_block_in_a_user_message(state: Any) -> None:
    flat = FlatMessage(
        role="tool",
        content="3 results",
        parts=[_MEDIA[0]],
        tool_call_id="c1",
        tool_name="search",
        tool_result_state=state,
        **_COMMON,
    )
    result = ToolResultBlock(
        call_id="c1", name="search", output=[TextBlock(text="3 results"), _MEDIA[0]], state=state
    )
    agentic = AgenticMessage(role="user", blocks=[result], **_COMMON)
    assert flat_to_agentic(flat) == agentic
    assert agentic_to_flat(agentic) == [flat]


def test_reasoning_content_maps_to_a_reasoning_block() -> None:
    flat = FlatMessage(role="assistant", content="42", reasoning_content="6 * 7", **_COMMON)
    agentic = AgenticMessage(
        role="assistant",
        blocks=[ReasoningBlock(text="6 * 7"), TextBlock(text="42")],
        **_COMMON,
    )
    assert flat_to_agentic(flat) == agentic
    assert agentic_to_flat(agentic) == [flat]


@pytest.mark.parametrize("role", ["user", "assistant"])
def test_multimodal_parts_map_to_media_blocks(role: Any) -> None:
    flat = FlatMessage(role=role, content="look", parts=[*_MEDIA, TextBlock(text="and")])
    agentic = AgenticMessage(
        role=role, blocks=[TextBlock(text="look"), *_MEDIA, TextBlock(text="and")]
    )
    assert flat_to_agentic(flat) == agentic
    assert agentic_to_flat(agentic) == [flat]


def test_media_without_text_stays_media() -> None:
    flat = FlatMessage(role="user", parts=_MEDIA)
    agentic = flat_to_agentic(flat)
    assert agentic.blocks == _MEDIA
    assert agentic_to_flat(agentic) == [flat]


@pytest.mark.parametrize("role", ["system", "user", "assistant", "tool"])
def test_common_fields_are_kept(role: Any) -> None:
    extra: dict[str, Any] = {"tool_call_id": "c1"} if role == "tool" else {}
    flat = FlatMessage(role=role, content="x", **extra, **_COMMON)
    agentic = flat_to_agentic(flat)
    (back,) = agentic_to_flat(agentic)
    for msg in (agentic, back):
        assert msg.id == _COMMON["id"]
        assert msg.metadata == _COMMON["metadata"]
        assert msg.create_time == _COMMON["create_time"]
        assert msg.name == _COMMON["name"]
        assert msg.usage == _COMMON["usage"]


def test_empty_messages() -> None:
    for role in ("system", "user", "assistant"):
        flat = FlatMessage(role=role)
        assert flat_to_agentic(flat) == AgenticMessage(role=role)
        assert agentic_to_flat(AgenticMessage(role=role)) == [flat]


def test_list_conversions() -> None:
    flat = FlatMessage(role="user", content="hi")
    agentic = AgenticMessage(role="assistant", blocks=[TextBlock(text="yo")])
    assert to_agentic([flat, agentic]) == [flat_to_agentic(flat), agentic]
    assert to_agentic([flat, agentic])[1] is agentic
    assert to_flat([flat, agentic]) == [flat, *agentic_to_flat(agentic)]
    assert to_flat([flat, agentic])[0] is flat
    assert to_kind([flat, agentic], "flat") == to_flat([flat, agentic])
    assert to_kind([flat, agentic], "agentic") == to_agentic([flat, agentic])


# --- properties --------------------------------------------------------------------------


@settings(max_examples=500)
@given(msg=hs.flat_messages(canonical=True))
def test_flat_to_agentic_to_flat_is_the_identity_for_canonical_flat(msg: FlatMessage) -> None:
    """Canonical flat (see `hs.is_canonical_flat`): when `content` is empty, `parts` does not
    start with a text block; `tool_name` and `tool_result_state` are defaults unless role tool."""
    assert hs.is_canonical_flat(msg)
    agentic = flat_to_agentic(msg)
    assert message_violations(agentic) == []
    assert agentic_to_flat(agentic) == [msg]


@settings(max_examples=500)
@given(msg=hs.flat_messages())
def test_flat_round_trip_holds_exactly_for_canonical_flat(msg: FlatMessage) -> None:
    agentic = flat_to_agentic(msg)
    assert message_violations(agentic) == []
    assert (agentic_to_flat(agentic) == [msg]) == hs.is_canonical_flat(msg)


@settings(max_examples=500)
@given(msg=hs.overlap_messages())
def test_agentic_to_flat_to_agentic_is_the_identity_inside_the_overlap(
    msg: AgenticMessage,
) -> None:
    """The overlap (see `hs.in_overlap`): a user message with exactly one tool_result block,
    or blocks ordered reasoning?, text/media*, tool_call*, with ids, signature and a leading
    empty text only where flat has room for them."""
    assert hs.in_overlap(msg)
    flat = agentic_to_flat(msg)
    assert len(flat) == 1
    assert message_violations(flat[0]) == []
    assert to_agentic(flat) == [msg]


@settings(max_examples=500)
@given(msg=hs.agentic_messages())
def test_agentic_round_trip_holds_exactly_inside_the_overlap(msg: AgenticMessage) -> None:
    flat = agentic_to_flat(msg)
    assert all(message_violations(f) == [] for f in flat)
    assert (to_agentic(flat) == [msg]) == hs.in_overlap(msg)


# --- what does not map -------------------------------------------------------------------


def test_reasoning_signature_is_lost_in_flat() -> None:
    agentic = AgenticMessage(
        role="assistant",
        blocks=[ReasoningBlock(text="hmm", signature="sig-123"), TextBlock(text="a")],
    )
    (flat,) = agentic_to_flat(agentic)
    assert flat.reasoning_content == "hmm"
    assert flat_to_agentic(flat).blocks == [ReasoningBlock(text="hmm"), TextBlock(text="a")]


def test_several_reasoning_blocks_merge_into_one() -> None:
    agentic = AgenticMessage(
        role="assistant",
        blocks=[ReasoningBlock(text="a"), TextBlock(text="x"), ReasoningBlock(text="b")],
    )
    (flat,) = agentic_to_flat(agentic)
    assert (flat.reasoning_content, flat.content) == ("ab", "x")


def test_block_ids_are_lost_where_flat_has_no_block() -> None:
    agentic = AgenticMessage(
        role="assistant",
        blocks=[
            ReasoningBlock(text="r", id="b-r"),
            TextBlock(text="lead", id="b-lead"),
            TextBlock(text="more", id="b-more"),
            ImageBlock(source=UrlSource(url="https://e.x/i.png"), id="b-img"),
            ToolCallBlock(call_id="c1", name="t", id="b-call"),
        ],
    )
    (flat,) = agentic_to_flat(agentic)
    back = flat_to_agentic(flat)
    # Reasoning, the leading text (it becomes `content`) and tool calls lose their ids...
    assert [b.id for b in back.blocks] == ["", "", "b-more", "b-img", ""]
    # ...and so does a tool result block, and the leading text block of its output.
    result = ToolResultBlock(call_id="c1", output=[TextBlock(text="o", id="b-o")], id="b-res")
    (tool,) = agentic_to_flat(AgenticMessage(role="user", blocks=[result]))
    assert flat_to_agentic(tool).blocks == [
        ToolResultBlock(call_id="c1", output=[TextBlock(text="o")])
    ]


def test_a_mixed_user_message_splits_into_tool_messages_and_a_user_message() -> None:
    agentic = AgenticMessage(
        role="user",
        blocks=[
            TextBlock(text="thanks, and"),
            ToolResultBlock(call_id="c1", name="search", output=[TextBlock(text="r1")]),
            _MEDIA[0],
            ToolResultBlock(call_id="c2", name="fetch", state="error"),
        ],
        **_COMMON,
    )
    flat = agentic_to_flat(agentic)
    common = {k: v for k, v in _COMMON.items() if k != "id"}
    assert flat == [
        FlatMessage(
            id="m1", role="tool", content="r1", tool_call_id="c1", tool_name="search", **common
        ),
        FlatMessage(
            id="m1#1",
            role="tool",
            tool_call_id="c2",
            tool_name="fetch",
            tool_result_state="error",
            **common,
        ),
        FlatMessage(id="m1#2", role="user", content="thanks, and", parts=[_MEDIA[0]], **common),
    ]
    assert [m.role for m in to_agentic(flat)] == ["user", "user", "user"]


def test_a_split_without_id_leaves_ids_empty() -> None:
    agentic = AgenticMessage(
        role="user", blocks=[ToolResultBlock(call_id="c1"), ToolResultBlock(call_id="c2")]
    )
    assert [m.id for m in agentic_to_flat(agentic)] == ["", ""]


def test_hint_blocks_become_text_parts() -> None:
    agentic = AgenticMessage(
        role="user",
        blocks=[TextBlock(text="question"), HintBlock(text="passage", source="rag", id="h1")],
    )
    (flat,) = agentic_to_flat(agentic)
    assert (flat.content, flat.parts) == ("question", [TextBlock(text="passage")])
    hint = make_hint("agentic", "budget low", "budget", id="h2")
    (flat_hint,) = agentic_to_flat(hint)  # type: ignore[arg-type]
    assert (flat_hint.role, flat_hint.content, flat_hint.metadata) == ("user", "budget low", None)
    assert not is_hint(flat_hint)


def test_a_flat_hint_becomes_agentic_user_text() -> None:
    hint = make_hint("flat", "budget low", "budget", id="h1")
    agentic = flat_to_agentic(hint)  # type: ignore[arg-type]
    assert agentic.blocks == [TextBlock(text="budget low")]
    assert agentic.metadata == {HINT_METADATA_KEY: "budget"}
    assert agentic.id == "h1"
    assert not is_hint(agentic)


def test_interleaved_text_and_tool_calls_normalise() -> None:
    calls = _call_blocks(_CALLS)
    agentic = AgenticMessage(
        role="assistant",
        blocks=[TextBlock(text="a"), calls[0], TextBlock(text="b"), calls[1]],
    )
    (flat,) = agentic_to_flat(agentic)
    assert (flat.content, flat.parts, flat.tool_calls) == ("a", [TextBlock(text="b")], _CALLS)
    assert flat_to_agentic(flat).blocks == [TextBlock(text="a"), TextBlock(text="b"), *calls]


def test_a_leading_empty_text_block_is_dropped() -> None:
    agentic = AgenticMessage(role="user", blocks=[TextBlock(text=""), _MEDIA[0]])
    assert flat_to_agentic(agentic_to_flat(agentic)[0]).blocks == [_MEDIA[0]]


def test_flat_text_parts_after_empty_content_become_content() -> None:
    flat = FlatMessage(role="user", parts=[TextBlock(text="hi", id="p1"), _MEDIA[0]])
    assert agentic_to_flat(flat_to_agentic(flat)) == [
        FlatMessage(role="user", content="hi", parts=[_MEDIA[0]])
    ]


def test_tool_fields_of_other_flat_roles_are_dropped() -> None:
    flat = FlatMessage(role="user", content="x", tool_name="search", tool_result_state="error")
    assert agentic_to_flat(flat_to_agentic(flat)) == [FlatMessage(role="user", content="x")]
