"""Exact round trips model → proto → bytes → proto → model, and the decoder's errors."""

from __future__ import annotations

from typing import Any, get_args

import grpc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hookmesh.errors import SchemaError
from hookmesh.schema import (
    EVENT_TYPES,
    AgenticMessage,
    ContentBlock,
    EventSource,
    FlatMessage,
    ReplyEndEvent,
    TextBlock,
    block_from_proto,
    block_to_proto,
    event_from_proto,
    event_to_proto,
    is_nested,
    message_from_proto,
    message_to_proto,
    messages_from_proto,
    nest,
)
from hookmesh.v1 import content_pb2 as _content_pb2
from hookmesh.v1 import event_pb2 as _event_pb2
from hookmesh.v1 import message_pb2 as _message_pb2
from tests import strategies as hs

_EXAMPLES = 500
_BLOCK_TYPES = tuple(
    cls.model_fields["type"].default for cls in get_args(get_args(ContentBlock)[0])
)
_BLOCKS = hs.block_strategies(valid=False)
_EVENTS = hs.event_strategies(valid=False)


def _wire(pb: Any) -> Any:
    """`pb` serialised and parsed back, as a peer receives it."""
    return type(pb).FromString(pb.SerializeToString())


def _fields(exc: pytest.ExceptionInfo[SchemaError]) -> list[str]:
    assert exc.value.reason == "INVALID_SCHEMA"
    assert exc.value.code == grpc.StatusCode.INVALID_ARGUMENT
    return [v.field for v in exc.value.violations]


# --- the tags are the proto oneof arms ---------------------------------------------------


def test_block_tags_are_the_content_block_arms() -> None:
    arms = _content_pb2.ContentBlock.DESCRIPTOR.oneofs_by_name["block"].fields
    assert tuple(f.name for f in arms) == _BLOCK_TYPES
    assert set(_BLOCKS) == set(_BLOCK_TYPES)


def test_event_tags_are_the_agent_event_arms() -> None:
    arms = _event_pb2.AgentEvent.DESCRIPTOR.oneofs_by_name["event"].fields
    assert tuple(f.name for f in arms) == EVENT_TYPES
    assert set(_EVENTS) == set(EVENT_TYPES)


# --- round trips -------------------------------------------------------------------------


@pytest.mark.parametrize("block_type", _BLOCK_TYPES)
@settings(max_examples=_EXAMPLES)
@given(data=st.data())
def test_block_roundtrip(block_type: str, data: st.DataObject) -> None:
    block = data.draw(_BLOCKS[block_type])
    pb = block_to_proto(block)
    assert pb.WhichOneof("block") == block_type
    assert block_from_proto(_wire(pb)) == block


@settings(max_examples=_EXAMPLES)
@given(msg=hs.flat_messages())
def test_flat_message_roundtrip(msg: FlatMessage) -> None:
    pb = message_to_proto(msg)
    assert pb.WhichOneof("kind") == "flat"
    assert message_from_proto(_wire(pb)) == msg


@settings(max_examples=_EXAMPLES)
@given(msg=hs.agentic_messages())
def test_agentic_message_roundtrip(msg: AgenticMessage) -> None:
    pb = message_to_proto(msg)
    assert pb.WhichOneof("kind") == "agentic"
    assert message_from_proto(_wire(pb)) == msg


@settings(max_examples=100)
@given(msgs=st.lists(hs.messages(), max_size=4))
def test_message_list_roundtrip(msgs: list[Any]) -> None:
    pbs = [_wire(message_to_proto(m)) for m in msgs]
    assert messages_from_proto(pbs) == msgs


@pytest.mark.parametrize("event_type", EVENT_TYPES)
@settings(max_examples=_EXAMPLES)
@given(data=st.data())
def test_event_roundtrip(event_type: str, data: st.DataObject) -> None:
    event = data.draw(_EVENTS[event_type])
    pb = event_to_proto(event)
    assert pb.WhichOneof("event") == event_type
    assert event_from_proto(_wire(pb)) == event


def test_a_nested_event_keeps_its_path_outermost_first_over_the_wire() -> None:
    inner = ReplyEndEvent(reply_id="sub-2", finish_reason="completed")
    step_in = EventSource(call_id="c2", tool_name="skill", agent_name="deep", run_id="sub-2")
    step_out = EventSource(call_id="c1", tool_name="skill", agent_name="outer", run_id="sub-1")
    forwarded = nest(nest(inner, step_in, "sub-1"), step_out, "top")
    assert (forwarded.reply_id, forwarded.source_path) == ("top", [step_out, step_in])
    assert inner.source_path is None and not is_nested(inner) and is_nested(forwarded)
    pb = _wire(event_to_proto(forwarded))
    assert [s.call_id for s in pb.source_path] == ["c1", "c2"] and pb.reply_id == "top"
    assert event_from_proto(pb) == forwarded
    assert not event_to_proto(inner).source_path  # the reply's own events carry no path


def test_absent_and_empty_metadata_stay_apart() -> None:
    metadata: dict[str, Any] | None
    for metadata in (None, {}):
        msg = FlatMessage(role="user", metadata=metadata)
        assert message_from_proto(_wire(message_to_proto(msg))).metadata == metadata


# --- decode errors -----------------------------------------------------------------------


def test_content_block_without_arm() -> None:
    with pytest.raises(SchemaError) as exc:
        block_from_proto(_content_pb2.ContentBlock(id="b1"))
    assert _fields(exc) == ["block"]


def test_content_block_without_arm_inside_a_message() -> None:
    pb = _message_pb2.Message(
        agentic=_message_pb2.AgenticMessage(
            role=_message_pb2.ROLE_USER,
            blocks=[
                _content_pb2.ContentBlock(text=_content_pb2.TextBlock(text="hi")),
                _content_pb2.ContentBlock(id="empty"),
            ],
        )
    )
    with pytest.raises(SchemaError) as exc:
        message_from_proto(_wire(pb))
    assert _fields(exc) == ["message.agentic.blocks[1]"]


def test_message_without_kind() -> None:
    with pytest.raises(SchemaError) as exc:
        message_from_proto(_message_pb2.Message(id="m1"))
    assert _fields(exc) == ["message"]


@pytest.mark.parametrize("arm", ["image", "audio", "video", "document"])
def test_media_source_without_arm(arm: str) -> None:
    pb = _content_pb2.ContentBlock(**{arm: _content_pb2.MediaBlock(name="x.bin")})
    with pytest.raises(SchemaError) as exc:
        block_from_proto(_wire(pb))
    assert _fields(exc) == [f"block.{arm}.source"]


def test_media_source_without_arm_inside_a_tool_result() -> None:
    result = _content_pb2.ToolResultBlock(
        call_id="c1",
        output=[
            _content_pb2.ContentBlock(text=_content_pb2.TextBlock(text="ok")),
            _content_pb2.ContentBlock(image=_content_pb2.MediaBlock()),
        ],
    )
    pb = _message_pb2.Message(
        agentic=_message_pb2.AgenticMessage(
            role=_message_pb2.ROLE_USER, blocks=[_content_pb2.ContentBlock(tool_result=result)]
        )
    )
    with pytest.raises(SchemaError) as exc:
        message_from_proto(_wire(pb))
    assert _fields(exc) == ["message.agentic.blocks[0].tool_result.output[1].image.source"]


def test_agent_event_without_arm() -> None:
    with pytest.raises(SchemaError) as exc:
        event_from_proto(_event_pb2.AgentEvent(reply_id="r1"))
    assert _fields(exc) == ["event"]


@pytest.mark.parametrize("kind", ["flat", "agentic"])
@pytest.mark.parametrize("role", [0, 99])
def test_unknown_or_unset_role(kind: str, role: int) -> None:
    pb = _message_pb2.Message()
    getattr(pb, kind).role = role  # proto3 enums are open: 99 parses
    with pytest.raises(SchemaError) as exc:
        message_from_proto(_wire(pb))
    assert _fields(exc) == [f"message.{kind}.role"]


def test_unknown_tool_result_state_in_a_block() -> None:
    pb = _content_pb2.ContentBlock(tool_result=_content_pb2.ToolResultBlock(call_id="c1"))
    pb.tool_result.state = 42  # type: ignore[assignment]
    with pytest.raises(SchemaError) as exc:
        block_from_proto(_wire(pb))
    assert _fields(exc) == ["block.tool_result.state"]


def test_unknown_tool_result_state_in_a_flat_message() -> None:
    pb = _message_pb2.Message(
        flat=_message_pb2.FlatMessage(role=_message_pb2.ROLE_TOOL, tool_call_id="c1")
    )
    pb.flat.tool_result_state = 7  # type: ignore[assignment]
    with pytest.raises(SchemaError) as exc:
        message_from_proto(_wire(pb))
    assert _fields(exc) == ["message.flat.tool_result_state"]


@pytest.mark.parametrize("value", [0, 77])
def test_unknown_or_unset_finish_reason(value: int) -> None:
    pb = _event_pb2.AgentEvent(reply_id="r1", reply_end=_event_pb2.ReplyEndEvent())
    pb.reply_end.finish_reason = value  # type: ignore[assignment]
    with pytest.raises(SchemaError) as exc:
        event_from_proto(_wire(pb))
    assert _fields(exc) == ["event.reply_end.finish_reason"]


def test_unknown_state_in_tool_result_end() -> None:
    pb = _event_pb2.AgentEvent(tool_result_end=_event_pb2.ToolResultEndEvent(call_id="c1"))
    pb.tool_result_end.state = 9  # type: ignore[assignment]
    with pytest.raises(SchemaError) as exc:
        event_from_proto(_wire(pb))
    assert _fields(exc) == ["event.tool_result_end.state"]


def test_tool_role_in_an_agentic_message() -> None:
    pb = _message_pb2.Message(agentic=_message_pb2.AgenticMessage(role=_message_pb2.ROLE_TOOL))
    with pytest.raises(SchemaError) as exc:
        message_from_proto(_wire(pb))
    assert _fields(exc) == ["message.agentic.role"]


def test_reasoning_block_inside_a_tool_result_output() -> None:
    result = _content_pb2.ToolResultBlock(
        call_id="c1",
        output=[
            _content_pb2.ContentBlock(text=_content_pb2.TextBlock(text="ok")),
            _content_pb2.ContentBlock(reasoning=_content_pb2.ReasoningBlock(text="hmm")),
        ],
    )
    pb = _message_pb2.Message(
        agentic=_message_pb2.AgenticMessage(
            role=_message_pb2.ROLE_USER, blocks=[_content_pb2.ContentBlock(tool_result=result)]
        )
    )
    with pytest.raises(SchemaError) as exc:
        message_from_proto(_wire(pb))
    assert _fields(exc) == ["message.agentic.blocks[0].tool_result.output[1].reasoning"]


@pytest.mark.parametrize("arm", ["reasoning", "tool_call", "tool_result", "hint"])
def test_non_output_block_in_flat_parts(arm: str) -> None:
    body: Any = {
        "reasoning": _content_pb2.ReasoningBlock(text="r"),
        "tool_call": _content_pb2.ToolCallBlock(call_id="c1", name="t"),
        "tool_result": _content_pb2.ToolResultBlock(call_id="c1"),
        "hint": _content_pb2.HintBlock(text="h"),
    }[arm]
    pb = _message_pb2.Message(
        flat=_message_pb2.FlatMessage(
            role=_message_pb2.ROLE_USER,
            parts=[
                _content_pb2.ContentBlock(text=_content_pb2.TextBlock(text="t")),
                _content_pb2.ContentBlock(**{arm: body}),
            ],
        )
    )
    with pytest.raises(SchemaError) as exc:
        message_from_proto(_wire(pb))
    assert _fields(exc) == [f"message.flat.parts[1].{arm}"]


def test_tool_result_delta_media_must_be_media() -> None:
    text = _content_pb2.ContentBlock(text=_content_pb2.TextBlock(text="t"))
    call = _content_pb2.ContentBlock(tool_call=_content_pb2.ToolCallBlock(call_id="c", name="t"))
    for media, path in [
        (text, "event.tool_result_delta.media.text"),
        (call, "event.tool_result_delta.media.tool_call"),
        (_content_pb2.ContentBlock(), "event.tool_result_delta.media"),
        (
            _content_pb2.ContentBlock(audio=_content_pb2.MediaBlock()),
            "event.tool_result_delta.media.audio.source",
        ),
    ]:
        pb = _event_pb2.AgentEvent(
            tool_result_delta=_event_pb2.ToolResultDeltaEvent(call_id="c", media=media)
        )
        with pytest.raises(SchemaError) as exc:
            event_from_proto(_wire(pb))
        assert _fields(exc) == [path]


def test_messages_from_proto_collects_every_violation() -> None:
    good = message_to_proto(FlatMessage(role="user", content="hi"))
    tool_role = _message_pb2.Message(
        agentic=_message_pb2.AgenticMessage(role=_message_pb2.ROLE_TOOL)
    )
    no_kind = _message_pb2.Message(id="m3")
    bad_block = message_to_proto(AgenticMessage(role="assistant", blocks=[TextBlock(text="a")]))
    bad_block.agentic.blocks.add()  # a block with no arm
    pbs = [good, tool_role, good, no_kind, bad_block]
    with pytest.raises(SchemaError) as exc:
        messages_from_proto([_wire(pb) for pb in pbs])
    assert _fields(exc) == [
        "messages[1].agentic.role",
        "messages[3]",
        "messages[4].agentic.blocks[1]",
    ]
    assert exc.value.metadata == {"field": "messages[1].agentic.role", "violationCount": "3"}


def test_messages_from_proto_path_prefix() -> None:
    with pytest.raises(SchemaError) as exc:
        messages_from_proto([_message_pb2.Message()], path="request.messages")
    assert _fields(exc) == ["request.messages[0]"]
