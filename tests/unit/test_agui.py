"""Tests of the AG-UI message codec: docs examples, round trips, legacy parts and bad input."""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hookmesh.errors import SchemaError
from hookmesh.schema import (
    AgenticMessage,
    AudioBlock,
    DocumentBlock,
    FlatMessage,
    ImageBlock,
    InlineSource,
    Message,
    MessageKind,
    ReasoningBlock,
    TextBlock,
    ToolCall,
    ToolCallBlock,
    ToolResultBlock,
    UrlSource,
    VideoBlock,
)
from hookmesh.schema.agui import (
    AGUI_METADATA_KEY,
    message_from_agui,
    message_to_agui,
    messages_from_agui,
    messages_to_agui,
)

KINDS: tuple[MessageKind, ...] = ("flat", "agentic")
PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n\xe2\xe3"
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01"

# --- the AG-UI messages documentation examples, written as the docs show them -------------

USER_TEXT = {"id": "msg_1", "role": "user", "content": "What's the weather in New York?"}
USER_TEXT_IMAGE = {
    "id": "user-2",
    "role": "user",
    "content": [
        {"type": "text", "text": "Describe this image."},
        {
            "type": "image",
            "source": {
                "type": "url",
                "value": "https://example.com/image.png",
                "mimeType": "image/png",
            },
        },
    ],
}
USER_DOCUMENT = {
    "id": "user-3",
    "role": "user",
    "content": [
        {"type": "text", "text": "Summarize this PDF"},
        {
            "type": "document",
            "source": {
                "type": "data",
                "value": base64.b64encode(PDF).decode("ascii"),
                "mimeType": "application/pdf",
            },
        },
    ],
}
ASSISTANT_TOOL_CALLS = {
    "id": "msg_123",
    "role": "assistant",
    "content": "I'll help you with that calculation.",
    "toolCalls": [
        {
            "id": "call_456",
            "type": "function",
            "function": {"name": "calculate", "arguments": '{"expression": "24 * 7"}'},
        }
    ],
}
TOOL_RESULT = {"id": "result_789", "role": "tool", "content": "168", "toolCallId": "call_456"}
TOOL_ERROR = {
    "id": "result_790",
    "role": "tool",
    "content": "",
    "toolCallId": "call_457",
    "error": "Division by zero",
}
DEVELOPER = {"id": "dev_1", "role": "developer", "content": "Log every tool call.", "name": "ops"}
SYSTEM = {"id": "sys_1", "role": "system", "content": "You are a helpful assistant."}
REASONING = {
    "id": "reasoning_1",
    "role": "reasoning",
    "content": "The user wants 24 * 7; I should call the calculator.",
    "encryptedValue": "gAAAAABo-opaque-provider-blob",
}

DOC_EXAMPLES: dict[str, dict[str, Any]] = {
    "user_text": USER_TEXT,
    "user_text_image": USER_TEXT_IMAGE,
    "user_document": USER_DOCUMENT,
    "assistant_tool_calls": ASSISTANT_TOOL_CALLS,
    "tool_result": TOOL_RESULT,
    "tool_error": TOOL_ERROR,
    "developer": DEVELOPER,
    "system": SYSTEM,
    "reasoning": REASONING,
}

# The docs' "practical example" conversation.
CONVERSATION: list[dict[str, Any]] = [
    {"id": "msg_1", "role": "user", "content": "What's the weather in New York?"},
    {
        "id": "msg_2",
        "role": "assistant",
        "content": "Let me check the weather for you.",
        "toolCalls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "arguments": '{"location": "New York", "unit": "celsius"}',
                },
            }
        ],
    },
    {
        "id": "result_1",
        "role": "tool",
        "content": '{"temperature": 22, "condition": "Partly Cloudy", "humidity": 65}',
        "toolCallId": "call_1",
    },
    {
        "id": "msg_3",
        "role": "assistant",
        "content": "The weather in New York is partly cloudy, 22°C and 65% humidity.",
    },
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("example", DOC_EXAMPLES.values(), ids=DOC_EXAMPLES.keys())
def test_docs_example_round_trips(example: dict[str, Any], kind: MessageKind) -> None:
    original = copy.deepcopy(example)
    msg = message_from_agui(example, kind)
    assert msg.kind == kind
    assert msg.id == example["id"]
    assert message_to_agui(msg) == example
    assert example == original  # decoding does not mutate its input


@pytest.mark.parametrize("kind", KINDS)
def test_conversation_round_trips(kind: MessageKind) -> None:
    messages = messages_from_agui(CONVERSATION, kind)
    assert [m.kind for m in messages] == [kind] * 4
    assert messages_to_agui(messages) == CONVERSATION


def test_user_text_decodes() -> None:
    flat = message_from_agui(USER_TEXT, "flat")
    assert flat == FlatMessage(id="msg_1", role="user", content="What's the weather in New York?")
    agentic = message_from_agui(USER_TEXT, "agentic")
    assert agentic == AgenticMessage(
        id="msg_1", role="user", blocks=[TextBlock(text="What's the weather in New York?")]
    )


def _agentic(data: dict[str, Any]) -> AgenticMessage:
    msg = message_from_agui(data, "agentic")
    assert isinstance(msg, AgenticMessage)
    return msg


def _content_blocks(msg: Message) -> list[Any]:
    return list(msg.parts if isinstance(msg, FlatMessage) else msg.blocks)


def test_user_text_image_decodes() -> None:
    image = ImageBlock(source=UrlSource(url="https://example.com/image.png", mime_type="image/png"))
    flat = message_from_agui(USER_TEXT_IMAGE, "flat")
    assert flat == FlatMessage(
        id="user-2", role="user", content="Describe this image.", parts=[image]
    )
    assert _agentic(USER_TEXT_IMAGE).blocks == [TextBlock(text="Describe this image."), image]


@pytest.mark.parametrize("kind", KINDS)
def test_document_data_source_stays_a_document(kind: MessageKind) -> None:
    msg = message_from_agui(USER_DOCUMENT, kind)
    blocks = msg.parts if isinstance(msg, FlatMessage) else msg.blocks[1:]
    assert len(blocks) == 1
    doc = blocks[0]
    assert isinstance(doc, DocumentBlock)
    assert isinstance(doc.source, InlineSource)
    assert doc.source.data == PDF
    assert doc.source.mime_type == "application/pdf"


def test_assistant_tool_calls_decode() -> None:
    call = ("call_456", "calculate", '{"expression": "24 * 7"}')
    flat = message_from_agui(ASSISTANT_TOOL_CALLS, "flat")
    assert isinstance(flat, FlatMessage)
    assert flat.role == "assistant"
    assert flat.content == "I'll help you with that calculation."
    assert flat.tool_calls == [ToolCall(id=call[0], name=call[1], arguments=call[2])]
    assert _agentic(ASSISTANT_TOOL_CALLS).blocks == [
        TextBlock(text="I'll help you with that calculation."),
        ToolCallBlock(call_id=call[0], name=call[1], arguments=call[2]),
    ]


def test_tool_messages_decode() -> None:
    flat = message_from_agui(TOOL_RESULT, "flat")
    assert flat == FlatMessage(id="result_789", role="tool", content="168", tool_call_id="call_456")
    agentic = message_from_agui(TOOL_RESULT, "agentic")
    assert agentic == AgenticMessage(
        id="result_789",
        role="user",
        blocks=[ToolResultBlock(call_id="call_456", output=[TextBlock(text="168")])],
    )
    failed = message_from_agui(TOOL_ERROR, "flat")
    assert isinstance(failed, FlatMessage)
    assert failed.tool_result_state == "error"
    assert failed.metadata == {AGUI_METADATA_KEY: {"toolErrors": {"call_457": "Division by zero"}}}
    assert _agentic(TOOL_ERROR).blocks == [ToolResultBlock(call_id="call_457", state="error")]


@pytest.mark.parametrize("kind", KINDS)
def test_developer_is_a_system_message(kind: MessageKind) -> None:
    msg = message_from_agui(DEVELOPER, kind)
    assert msg.role == "system"
    assert msg.name == "ops"
    assert msg.metadata == {AGUI_METADATA_KEY: {"role": "developer"}}
    assert message_to_agui(message_from_agui(SYSTEM, kind))["role"] == "system"


def test_reasoning_is_an_assistant_message_holding_only_reasoning() -> None:
    agentic = message_from_agui(REASONING, "agentic")
    assert agentic == AgenticMessage(
        id="reasoning_1",
        role="assistant",
        blocks=[ReasoningBlock(text=REASONING["content"], signature=REASONING["encryptedValue"])],
    )
    flat = message_from_agui(REASONING, "flat")
    assert isinstance(flat, FlatMessage)
    assert (flat.role, flat.content, flat.reasoning_content) == (
        "assistant",
        "",
        REASONING["content"],
    )
    # A flat message has no signature field: the value waits in metadata.
    assert flat.metadata == {AGUI_METADATA_KEY: {"encryptedValue": REASONING["encryptedValue"]}}


def test_metadata_and_name_round_trip() -> None:
    data = {
        "id": "u1",
        "role": "user",
        "name": "alice",
        "content": "hi",
        "metadata": {"source": "web", "n": 2},
    }
    for kind in KINDS:
        msg = message_from_agui(data, kind)
        assert (msg.name, msg.metadata) == ("alice", {"source": "web", "n": 2})
        assert message_to_agui(msg) == data


# --- content encodings --------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_all_media_kinds_round_trip(kind: MessageKind) -> None:
    data = {
        "id": "u1",
        "role": "user",
        "content": [
            {
                "type": "image",
                "source": {
                    "type": "data",
                    "value": base64.b64encode(PNG).decode(),
                    "mimeType": "image/png",
                },
                "metadata": {"detail": "high"},
            },
            {"type": "audio", "source": {"type": "url", "value": "https://x.test/a.wav"}},
            {
                "type": "video",
                "source": {"type": "url", "value": "https://x.test/v.mp4", "mimeType": "video/mp4"},
            },
            {"type": "text", "text": "what is this?"},
            {"type": "text", "text": "and this?"},
        ],
    }
    msg = message_from_agui(data, kind)
    blocks = _content_blocks(msg)
    assert [b.type for b in blocks] == ["image", "audio", "video", "text", "text"]
    assert isinstance(blocks[0], ImageBlock)
    assert blocks[0].source == InlineSource(data=PNG, mime_type="image/png")
    assert blocks[0].metadata == {"detail": "high"}
    assert message_to_agui(msg) == data


def test_one_text_block_built_in_python_encodes_as_string() -> None:
    msg = AgenticMessage(id="u1", role="user", blocks=[TextBlock(text="hi")])
    assert message_to_agui(msg)["content"] == "hi"
    assert message_to_agui(FlatMessage(id="u2", role="user"))["content"] == ""


@pytest.mark.parametrize("kind", KINDS)
def test_tool_content_parts_round_trip(kind: MessageKind) -> None:
    data = {
        "id": "t1",
        "role": "tool",
        "toolCallId": "c1",
        "content": [
            {"type": "text", "text": "chart:"},
            {
                "type": "image",
                "source": {"type": "url", "value": "https://x.test/c.png", "mimeType": "image/png"},
            },
        ],
    }
    assert message_to_agui(message_from_agui(data, kind)) == data


def test_assistant_without_content_omits_the_key() -> None:
    msg = AgenticMessage(
        id="a1", role="assistant", blocks=[ToolCallBlock(call_id="c1", name="f", arguments="{}")]
    )
    assert message_to_agui(msg) == {
        "id": "a1",
        "role": "assistant",
        "toolCalls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    }
    assert message_to_agui(FlatMessage(id="a2", role="assistant")) == {
        "id": "a2",
        "role": "assistant",
    }


# --- legacy binary parts ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mime", "cls"),
    [
        ("image/png", ImageBlock),
        ("audio/wav", AudioBlock),
        ("video/mp4", VideoBlock),
        ("application/pdf", DocumentBlock),
        ("text/plain", DocumentBlock),
    ],
)
def test_legacy_binary_maps_by_mime_type(mime: str, cls: type[DocumentBlock]) -> None:
    data = {
        "id": "u1",
        "role": "user",
        "content": [
            {
                "type": "binary",
                "mimeType": mime,
                "data": base64.b64encode(PDF).decode(),
                "filename": "f.bin",
            }
        ],
    }
    for kind in KINDS:
        msg = message_from_agui(data, kind)
        blocks = _content_blocks(msg)
        assert blocks == [cls(source=InlineSource(data=PDF, mime_type=mime), name="f.bin")]
        # Encoding writes the modern part, never `binary`.
        part = message_to_agui(msg)["content"][0]
        assert part["type"] == cls.model_fields["type"].default
        assert part["source"]["type"] == "data"


def test_legacy_binary_url() -> None:
    data = {
        "role": "user",
        "content": [{"type": "binary", "mimeType": "audio/ogg", "url": "https://x.test/a.ogg"}],
    }
    assert _agentic(data).blocks == [
        AudioBlock(source=UrlSource(url="https://x.test/a.ogg", mime_type="audio/ogg"))
    ]


# --- hookmesh → AG-UI → hookmesh ----------------------------------------------------------


def test_mixed_agentic_user_message_yields_tool_messages_then_user() -> None:
    msg = AgenticMessage(
        id="m1",
        role="user",
        blocks=[
            ToolResultBlock(call_id="c1", name="f", output=[TextBlock(text="one")]),
            ToolResultBlock(call_id="c2", name="g", output=[TextBlock(text="two")], state="denied"),
            TextBlock(text="and now?"),
        ],
    )
    encoded = messages_to_agui([msg])
    assert encoded == [
        {"id": "m1", "role": "tool", "content": "one", "toolCallId": "c1"},
        {
            "id": "m1#1",
            "role": "tool",
            "content": "two",
            "toolCallId": "c2",
            "error": "tool call was denied",
        },
        {"id": "m1#2", "role": "user", "content": "and now?"},
    ]
    with pytest.raises(SchemaError) as exc:
        message_to_agui(msg)
    assert exc.value.violations[0].field == "message"
    back = messages_from_agui(encoded, "agentic")
    assert [m.role for m in back] == ["user", "user", "user"]
    assert isinstance(back[1], AgenticMessage)
    result = back[1].blocks[0]
    assert isinstance(result, ToolResultBlock)
    assert result.state == "error"  # AG-UI has one failure flag


@pytest.mark.parametrize("kind", KINDS)
def test_assistant_with_reasoning_and_answer_splits(kind: MessageKind) -> None:
    agentic = AgenticMessage(
        id="a1",
        role="assistant",
        blocks=[
            ReasoningBlock(text="hmm", signature="sig"),
            TextBlock(text="42"),
            ToolCallBlock(call_id="c1", name="f", arguments="{}"),
        ],
    )
    encoded = messages_to_agui([agentic])
    assert encoded == [
        {"id": "a1#reasoning", "role": "reasoning", "content": "hmm", "encryptedValue": "sig"},
        {
            "id": "a1",
            "role": "assistant",
            "content": "42",
            "toolCalls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
    ]
    back = messages_from_agui(encoded, kind)
    assert messages_to_agui(back) == encoded


def test_flat_reasoning_signature_survives_conversion_to_agentic() -> None:
    flat = message_from_agui(REASONING, "flat")
    assert isinstance(flat, FlatMessage)
    from hookmesh.schema import flat_to_agentic

    assert message_to_agui(flat_to_agentic(flat)) == REASONING


@pytest.mark.parametrize(
    "msg",
    [
        FlatMessage(id="f1", role="user", content="hi", parts=[TextBlock(text="there")]),
        FlatMessage(
            id="f2",
            role="tool",
            content="ok",
            tool_call_id="c9",
            tool_result_state="error",
            metadata={"x": 1},
        ),
        FlatMessage(
            id="f3",
            role="assistant",
            content="sure",
            name="bot",
            tool_calls=[ToolCall(id="c1", name="f", arguments="{}")],
        ),
        AgenticMessage(
            id="a1",
            role="user",
            blocks=[
                DocumentBlock(source=InlineSource(data=PDF, mime_type="application/pdf")),
                TextBlock(text="summarize"),
            ],
        ),
        AgenticMessage(id="a2", role="system", blocks=[TextBlock(text="be brief")]),
    ],
    ids=lambda m: m.id,
)
def test_hookmesh_round_trip(msg: FlatMessage | AgenticMessage) -> None:
    encoded = message_to_agui(msg)
    back = message_from_agui(encoded, msg.kind)
    assert message_to_agui(back) == encoded
    if msg.kind == "agentic" or msg.tool_result_state == "success":
        assert back == msg


def test_media_in_assistant_or_system_cannot_be_encoded() -> None:
    image = ImageBlock(source=UrlSource(url="https://x.test/i.png"))
    msgs: list[Message] = [
        FlatMessage(id="s", role="system", content="x"),
        AgenticMessage(id="a", role="assistant", blocks=[TextBlock(text="see"), image]),
        FlatMessage(id="b", role="system", parts=[image]),
    ]
    with pytest.raises(SchemaError) as exc:
        messages_to_agui(msgs)
    assert [v.field for v in exc.value.violations] == ["messages[1]", "messages[2]"]


@given(data=st.binary(max_size=512), mime=st.sampled_from(["image/png", "application/pdf"]))
def test_inline_bytes_round_trip_exactly(data: bytes, mime: str) -> None:
    doc = DocumentBlock(source=InlineSource(data=data, mime_type=mime))
    msg = AgenticMessage(id="u", role="user", blocks=[doc])
    encoded = message_to_agui(msg)
    assert base64.b64decode(encoded["content"][0]["source"]["value"]) == data
    assert message_from_agui(encoded, "agentic") == msg


# --- bad input: SchemaError naming the JSON path ------------------------------------------


def _user(*parts: Any) -> dict[str, Any]:
    return {"id": "u", "role": "user", "content": [{"type": "text", "text": "look"}, *parts]}


def _data_source(**source: Any) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "data", **source}}


BAD = {
    "unknown_content_type": (_user({"type": "spreadsheet"}), "messages[0].content[1].type"),
    "missing_content_type": (_user({"text": "x"}), "messages[0].content[1].type"),
    "data_without_mime": (
        _user(_data_source(value="aGk=")),
        "messages[0].content[1].source.mimeType",
    ),
    "invalid_base64": (
        _user(_data_source(value="not base64!", mimeType="image/png")),
        "messages[0].content[1].source.value",
    ),
    "unpadded_base64": (
        _user(_data_source(value="aGk", mimeType="image/png")),
        "messages[0].content[1].source.value",
    ),
    "non_ascii_base64": (
        _user(_data_source(value="aGk=é", mimeType="image/png")),
        "messages[0].content[1].source.value",
    ),
    "missing_data_value": (
        _user(_data_source(mimeType="image/png")),
        "messages[0].content[1].source.value",
    ),
    "empty_url_value": (
        _user({"type": "image", "source": {"type": "url", "value": ""}}),
        "messages[0].content[1].source.value",
    ),
    "unknown_source_type": (
        _user({"type": "image", "source": {"type": "ftp", "value": "x"}}),
        "messages[0].content[1].source.type",
    ),
    "missing_source": (_user({"type": "document"}), "messages[0].content[1].source"),
    "media_metadata_not_object": (
        _user({"type": "audio", "source": {"type": "url", "value": "u"}, "metadata": [1]}),
        "messages[0].content[1].metadata",
    ),
    "text_part_without_text": (_user({"type": "text"}), "messages[0].content[1].text"),
    "non_dict_part": (_user("just a string"), "messages[0].content[1]"),
    "binary_id_only": (
        _user({"type": "binary", "mimeType": "image/png", "id": "upload-1"}),
        "messages[0].content[1].id",
    ),
    "binary_without_mime": (
        _user({"type": "binary", "url": "https://x.test/a"}),
        "messages[0].content[1].mimeType",
    ),
    "binary_bad_data": (
        _user({"type": "binary", "mimeType": "image/png", "data": "%%%"}),
        "messages[0].content[1].data",
    ),
    "binary_nothing": (
        _user({"type": "binary", "mimeType": "image/png"}),
        "messages[0].content[1]",
    ),
    "missing_role": ({"id": "x", "content": "hi"}, "messages[0].role"),
    "unknown_role": ({"id": "x", "role": "robot", "content": "hi"}, "messages[0].role"),
    "activity_role": (
        {"id": "x", "role": "activity", "activityType": "plan", "content": {}},
        "messages[0].role",
    ),
    "tool_without_call_id": ({"id": "x", "role": "tool", "content": "1"}, "messages[0].toolCallId"),
    "tool_empty_call_id": (
        {"id": "x", "role": "tool", "content": "1", "toolCallId": ""},
        "messages[0].toolCallId",
    ),
    "tool_error_not_string": (
        {"id": "x", "role": "tool", "content": "1", "toolCallId": "c", "error": True},
        "messages[0].error",
    ),
    "user_without_content": ({"id": "x", "role": "user"}, "messages[0].content"),
    "user_content_wrong_type": ({"id": "x", "role": "user", "content": 7}, "messages[0].content"),
    "system_content_wrong_type": (
        {"id": "x", "role": "system", "content": ["a"]},
        "messages[0].content",
    ),
    "reasoning_without_content": ({"id": "x", "role": "reasoning"}, "messages[0].content"),
    "id_wrong_type": ({"id": 5, "role": "user", "content": "hi"}, "messages[0].id"),
    "name_wrong_type": ({"role": "user", "content": "hi", "name": ["a"]}, "messages[0].name"),
    "metadata_wrong_type": (
        {"role": "user", "content": "hi", "metadata": "x"},
        "messages[0].metadata",
    ),
    "reserved_metadata_key": (
        {"role": "user", "content": "hi", "metadata": {AGUI_METADATA_KEY: {}}},
        "messages[0].metadata",
    ),
    "tool_calls_not_list": (
        {"role": "assistant", "toolCalls": {"id": "c"}},
        "messages[0].toolCalls",
    ),
    "tool_call_not_dict": ({"role": "assistant", "toolCalls": ["c"]}, "messages[0].toolCalls[0]"),
    "tool_call_without_id": (
        {"role": "assistant", "toolCalls": [{"type": "function", "function": {"name": "f"}}]},
        "messages[0].toolCalls[0].id",
    ),
    "tool_call_wrong_type": (
        {
            "role": "assistant",
            "toolCalls": [{"id": "c", "type": "mcp", "function": {"name": "f", "arguments": ""}}],
        },
        "messages[0].toolCalls[0].type",
    ),
    "tool_call_without_function": (
        {"role": "assistant", "toolCalls": [{"id": "c", "type": "function"}]},
        "messages[0].toolCalls[0].function",
    ),
    "tool_call_without_name": (
        {"role": "assistant", "toolCalls": [{"id": "c", "function": {"arguments": "{}"}}]},
        "messages[0].toolCalls[0].function.name",
    ),
    "tool_call_arguments_not_string": (
        {
            "role": "assistant",
            "toolCalls": [{"id": "c", "function": {"name": "f", "arguments": {}}}],
        },
        "messages[0].toolCalls[0].function.arguments",
    ),
    "assistant_content_wrong_type": (
        {"role": "assistant", "content": 1},
        "messages[0].content",
    ),
    "message_not_dict": ("hello", "messages[0]"),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("data", "field"), BAD.values(), ids=BAD.keys())
def test_bad_input_names_the_json_path(data: Any, field: str, kind: MessageKind) -> None:
    with pytest.raises(SchemaError) as exc:
        message_from_agui(data, kind)
    assert [v.field for v in exc.value.violations] == [field]
    assert exc.value.reason == "INVALID_SCHEMA"


def test_violations_of_one_message_are_collected() -> None:
    data = {
        "id": "u",
        "role": "user",
        "content": [
            _data_source(value="aGk="),
            {"type": "video", "source": {"type": "data", "value": "@@", "mimeType": "video/mp4"}},
            {"type": "hologram"},
        ],
    }
    with pytest.raises(SchemaError) as exc:
        message_from_agui(data, "flat", path="input.messages[3]")
    assert [v.field for v in exc.value.violations] == [
        "input.messages[3].content[0].source.mimeType",
        "input.messages[3].content[1].source.value",
        "input.messages[3].content[2].type",
    ]


def test_violations_of_all_messages_are_collected() -> None:
    data = [USER_TEXT, {"id": "x", "role": "tool", "content": "1"}, SYSTEM, {"role": "nope"}]
    with pytest.raises(SchemaError) as exc:
        messages_from_agui(data, "agentic")
    assert [v.field for v in exc.value.violations] == ["messages[1].toolCallId", "messages[3].role"]
    with pytest.raises(SchemaError) as exc:
        messages_from_agui({"messages": []}, "flat")  # type: ignore[arg-type]
    assert exc.value.violations[0].field == "messages"


# --- validation against the AG-UI Python SDK's own types (optional dependency) ------------


@pytest.mark.parametrize("kind", KINDS)
def test_encoded_output_validates_against_ag_ui_types(kind: MessageKind) -> None:
    import ag_ui.core as core
    from pydantic import TypeAdapter

    adapter: TypeAdapter[Any] = TypeAdapter(core.Message)
    examples: list[dict[str, Any]] = [*DOC_EXAMPLES.values(), *CONVERSATION]
    legacy = _user({"type": "binary", "mimeType": "application/pdf", "data": "aGk="})
    encoded = messages_to_agui(messages_from_agui([*examples, legacy], kind))
    for data in encoded:
        model = adapter.validate_python(data)
        assert not model.model_extra, f"keys AG-UI does not define: {model.model_extra}"
        assert adapter.dump_python(model, by_alias=True, mode="json") == data


# --- the content form decoded is the form encoded -----------------------------------------

ONE_PART_FORMS = {
    "user_one_text_part": {"id": "u1", "role": "user", "content": [{"type": "text", "text": "hi"}]},
    "user_empty_parts": {"id": "u2", "role": "user", "content": []},
    "user_empty_text_part": {"id": "u5", "role": "user", "content": [{"type": "text", "text": ""}]},
    "user_empty_string": {"id": "u3", "role": "user", "content": ""},
    "user_string": {"id": "u4", "role": "user", "content": "hi"},
    "tool_one_text_part": {
        "id": "t1",
        "role": "tool",
        "content": [{"type": "text", "text": "168"}],
        "toolCallId": "c1",
    },
    "tool_error_one_text_part": {
        "id": "t2",
        "role": "tool",
        "content": [{"type": "text", "text": "no"}],
        "toolCallId": "c2",
        "error": "failed",
    },
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("data", ONE_PART_FORMS.values(), ids=ONE_PART_FORMS.keys())
def test_content_keeps_the_form_it_was_decoded_from(
    data: dict[str, Any], kind: MessageKind
) -> None:
    msg = message_from_agui(data, kind)
    assert message_to_agui(msg) == data
    assert messages_to_agui(messages_from_agui([data], kind)) == [data]


def test_a_list_that_cannot_collapse_adds_no_metadata() -> None:
    msg = message_from_agui(USER_TEXT_IMAGE, "agentic")
    assert msg.metadata is None
    assert message_to_agui(message_from_agui(USER_TEXT, "flat")) == USER_TEXT
