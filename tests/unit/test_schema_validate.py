"""Semantic checks: every rule a message breaks, at its exact proto field path."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from hypothesis import given, settings

from hookmesh.errors import FieldViolation, SchemaError
from hookmesh.schema import (
    AgenticMessage,
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
    VideoBlock,
    check_messages,
    message_violations,
)
from tests import strategies as hs

_URL = UrlSource(url="https://example.com/x.png", mime_type="image/png")


def _fields(msg: Any, path: str = "message") -> list[str]:
    return [v.field for v in message_violations(msg, path)]


@settings(max_examples=200)
@given(msg=hs.messages())
def test_generated_messages_are_valid(msg: Any) -> None:
    assert message_violations(msg) == []
    check_messages([msg])


def test_tool_result_in_an_assistant_message() -> None:
    msg = AgenticMessage(
        role="assistant", blocks=[TextBlock(text="done"), ToolResultBlock(call_id="c1")]
    )
    assert _fields(msg) == ["message.agentic.blocks[1].tool_result"]
    assert "tool results go in user messages" in message_violations(msg)[0].description


def test_tool_call_in_a_user_message() -> None:
    msg = AgenticMessage(role="user", blocks=[ToolCallBlock(call_id="c1", name="t")])
    assert _fields(msg) == ["message.agentic.blocks[0].tool_call"]


@pytest.mark.parametrize(
    ("role", "block"),
    [
        ("system", ImageBlock(source=_URL)),
        ("system", ReasoningBlock(text="r")),
        ("system", ToolResultBlock(call_id="c1")),
        ("user", ReasoningBlock(text="r")),
        ("assistant", HintBlock(text="h")),
    ],
)
def test_blocks_a_role_cannot_hold(role: Any, block: Any) -> None:
    msg = AgenticMessage(role=role, blocks=[block])
    assert _fields(msg) == [f"message.agentic.blocks[0].{block.type}"]


def test_flat_tool_message_without_tool_call_id() -> None:
    msg = FlatMessage(role="tool", content="42")
    assert _fields(msg) == ["message.flat.tool_call_id"]


def test_tool_call_id_on_another_role() -> None:
    msg = FlatMessage(role="user", content="hi", tool_call_id="c1")
    assert _fields(msg) == ["message.flat.tool_call_id"]


@pytest.mark.parametrize("role", ["system", "user", "tool"])
def test_tool_calls_on_a_non_assistant_flat_message(role: Any) -> None:
    extra: dict[str, Any] = {"tool_call_id": "c0"} if role == "tool" else {}
    msg = FlatMessage(role=role, tool_calls=[ToolCall(id="c1", name="t")], **extra)
    assert _fields(msg) == ["message.flat.tool_calls"]


def test_reasoning_on_a_non_assistant_flat_message() -> None:
    msg = FlatMessage(role="user", reasoning_content="hmm")
    assert _fields(msg) == ["message.flat.reasoning_content"]


def test_media_in_a_flat_system_message() -> None:
    msg = FlatMessage(
        role="system", content="rules", parts=[TextBlock(text="more"), ImageBlock(source=_URL)]
    )
    assert _fields(msg) == ["message.flat.parts[1].image"]


def test_inline_media_without_mime_type() -> None:
    bad = VideoBlock(source=InlineSource(data=b"\x00", mime_type=""))
    assert _fields(AgenticMessage(role="user", blocks=[bad])) == [
        "message.agentic.blocks[0].video.source.inline.mime_type"
    ]
    assert _fields(FlatMessage(role="user", parts=[TextBlock(text="t"), bad])) == [
        "message.flat.parts[1].video.source.inline.mime_type"
    ]


def test_url_source_with_empty_url() -> None:
    bad = DocumentBlock(source=UrlSource(url="", mime_type="application/pdf"))
    assert _fields(AgenticMessage(role="assistant", blocks=[bad])) == [
        "message.agentic.blocks[0].document.source.url.url"
    ]


def test_media_inside_a_tool_result_output() -> None:
    result = ToolResultBlock(
        call_id="c1",
        output=[TextBlock(text="ok"), ImageBlock(source=InlineSource(data=b"", mime_type=""))],
    )
    msg = AgenticMessage(role="user", blocks=[TextBlock(text="hi"), result])
    assert _fields(msg) == [
        "message.agentic.blocks[1].tool_result.output[1].image.source.inline.mime_type"
    ]


def test_tool_result_without_call_id() -> None:
    msg = AgenticMessage(role="user", blocks=[ToolResultBlock(call_id="")])
    assert _fields(msg) == ["message.agentic.blocks[0].tool_result.call_id"]


def test_agentic_tool_call_without_id_or_name() -> None:
    msg = AgenticMessage(
        role="assistant",
        blocks=[
            ToolCallBlock(call_id="", name="t"),
            ToolCallBlock(call_id="c2", name=""),
            ToolCallBlock(call_id="", name=""),
        ],
    )
    assert _fields(msg) == [
        "message.agentic.blocks[0].tool_call.call_id",
        "message.agentic.blocks[1].tool_call.name",
        "message.agentic.blocks[2].tool_call.call_id",
        "message.agentic.blocks[2].tool_call.name",
    ]


def test_flat_tool_call_without_id_or_name() -> None:
    msg = FlatMessage(
        role="assistant",
        tool_calls=[
            ToolCall(id="c1", name="t"),
            ToolCall(id="", name="t"),
            ToolCall(id="c3", name=""),
        ],
    )
    assert _fields(msg) == ["message.flat.tool_calls[1].id", "message.flat.tool_calls[2].name"]


def test_every_violation_of_one_message_is_listed() -> None:
    msg = FlatMessage(
        role="user",
        parts=[ImageBlock(source=UrlSource(url=""))],
        tool_calls=[ToolCall(id="", name="")],
        tool_call_id="c1",
        reasoning_content="r",
    )
    assert _fields(msg, "req.message") == [
        "req.message.flat.parts[0].image.source.url.url",
        "req.message.flat.tool_call_id",
        "req.message.flat.tool_calls",
        "req.message.flat.tool_calls[0].id",
        "req.message.flat.tool_calls[0].name",
        "req.message.flat.reasoning_content",
    ]


def test_check_messages_collects_over_the_list() -> None:
    msgs: list[Any] = [
        FlatMessage(role="user", content="hi"),
        FlatMessage(role="tool", content="42"),
        AgenticMessage(role="user", blocks=[ToolCallBlock(call_id="c1", name="t")]),
        AgenticMessage(role="assistant", blocks=[TextBlock(text="ok")]),
    ]
    with pytest.raises(SchemaError) as exc:
        check_messages(msgs)
    assert exc.value.reason == "INVALID_SCHEMA"
    assert exc.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert exc.value.violations == [
        FieldViolation("messages[1].flat.tool_call_id", exc.value.violations[0].description),
        FieldViolation(
            "messages[2].agentic.blocks[0].tool_call", exc.value.violations[1].description
        ),
    ]
    assert exc.value.metadata == {"field": "messages[1].flat.tool_call_id", "violationCount": "2"}
    check_messages(msgs[:1] + msgs[3:])
    check_messages([])
    with pytest.raises(SchemaError) as exc:
        check_messages(msgs[1:2], path="request.messages")
    assert [v.field for v in exc.value.violations] == ["request.messages[0].flat.tool_call_id"]
