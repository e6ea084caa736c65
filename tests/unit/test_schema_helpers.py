"""Kind-aware helpers: the same question gets the same answer for flat and agentic messages."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings

from hookmesh.schema import (
    HINT_METADATA_KEY,
    AgenticMessage,
    FlatMessage,
    HintBlock,
    ImageBlock,
    InlineSource,
    Message,
    MessageKind,
    TextBlock,
    ToolCall,
    ToolResult,
    ToolResultBlock,
    UrlSource,
    copy_message,
    estimate_tokens,
    flat_to_agentic,
    is_assistant,
    is_hint,
    is_system,
    is_tool_result,
    is_user,
    make_assistant,
    make_hint,
    make_text,
    make_tool_result,
    make_user_text,
    map_text,
    reasoning_of,
    text_of,
    to_kind,
    tool_calls,
    tool_results,
    unanswered_tool_calls,
)
from tests import strategies as hs

KINDS: tuple[MessageKind, ...] = ("flat", "agentic")

_IMAGE = ImageBlock(source=UrlSource(url="https://example.com/cat.png", mime_type="image/png"))
_CALLS = [
    ToolCall(id="c1", name="search", arguments='{"q": "cats"}'),
    ToolCall(id="c2", name="fetch", arguments='{"url": "https://example.com"}'),
    ToolCall(id="c3", name="clock"),
]


def _mixed_user(kind: MessageKind) -> list[Message]:
    """One user turn answering c1 and c2 while saying more: one agentic message, or its flat
    form (two tool messages, then the user message)."""
    agentic = AgenticMessage(
        id="u1",
        role="user",
        blocks=[
            TextBlock(text="here you go"),
            ToolResultBlock(call_id="c1", name="search", output=[TextBlock(text="3 cats")]),
            ToolResultBlock(call_id="c2", name="fetch", output=[_IMAGE], state="error"),
        ],
    )
    return to_kind([agentic], kind)


def _predicates(msg: Message) -> tuple[bool, ...]:
    return (is_system(msg), is_user(msg), is_assistant(msg), is_tool_result(msg), is_hint(msg))


# --- predicates --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda k: make_text(k, "system", "be brief"), (True, False, False, False, False)),
        (lambda k: make_user_text(k, "hi"), (False, True, False, False, False)),
        (lambda k: make_assistant(k, "hello", _CALLS), (False, False, True, False, False)),
        (lambda k: make_tool_result(k, "c1", "search", "ok"), (False, False, False, True, False)),
        (
            lambda k: make_hint(k, "budget low", "budget", id="h1"),
            (False, False, False, False, True),
        ),
        (lambda k: make_text(k, "user", ""), (False, True, False, False, False)),
    ],
    ids=["system", "user", "assistant", "tool_result", "hint", "empty_user"],
)
def test_predicates(kind: MessageKind, make: Any, expected: tuple[bool, ...]) -> None:
    msg = make(kind)
    assert msg.kind == kind
    assert _predicates(msg) == expected


def test_empty_agentic_user_message_is_a_user_turn() -> None:
    assert is_user(AgenticMessage(role="user"))
    assert is_user(FlatMessage(role="user"))


@pytest.mark.parametrize("kind", KINDS)
def test_mixed_user_turn(kind: MessageKind) -> None:
    msgs = _mixed_user(kind)
    assert any(is_user(m) for m in msgs)
    assert [is_tool_result(m) for m in msgs].count(True) == (1 if kind == "agentic" else 2)
    assert not any(is_hint(m) or is_assistant(m) or is_system(m) for m in msgs)
    assert [r for m in msgs for r in tool_results(m)] == [
        ToolResult("c1", "search", [TextBlock(text="3 cats")], "success"),
        ToolResult("c2", "fetch", [_IMAGE], "error"),
    ]
    assert [text_of(m) for m in msgs if is_user(m)] == ["here you go"]


def test_mixed_agentic_user_message_is_user_and_tool_result() -> None:
    (msg,) = _mixed_user("agentic")
    assert isinstance(msg, AgenticMessage)
    assert is_user(msg)
    assert is_tool_result(msg)
    assert text_of(msg) == "here you go"
    only_results = AgenticMessage(
        role="user", blocks=[b for b in msg.blocks if b.type == "tool_result"]
    )
    assert not is_user(only_results)
    assert is_tool_result(only_results)


# --- reading -----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_text_of_joins_text_and_skips_reasoning_and_calls(kind: MessageKind) -> None:
    msg = make_assistant(kind, "the answer", _CALLS, reasoning="thinking")
    assert text_of(msg) == "the answer"
    assert reasoning_of(msg) == "thinking"
    assert text_of(make_assistant(kind, "", _CALLS)) == ""


def test_text_of_joins_with_newlines() -> None:
    flat = FlatMessage(role="user", content="a", parts=[_IMAGE, TextBlock(text="b")])
    agentic = flat_to_agentic(flat)
    assert text_of(flat) == text_of(agentic) == "a\nb"
    with_hint = AgenticMessage(
        role="user", blocks=[TextBlock(text="q"), HintBlock(text="h", source="rag")]
    )
    assert text_of(with_hint) == "q\nh"


@pytest.mark.parametrize("kind", KINDS)
def test_reasoning_of_is_empty_without_reasoning(kind: MessageKind) -> None:
    assert reasoning_of(make_assistant(kind, "hi")) == ""
    assert reasoning_of(make_user_text(kind, "hi")) == ""


@pytest.mark.parametrize("kind", KINDS)
def test_tool_calls_in_order(kind: MessageKind) -> None:
    assert tool_calls(make_assistant(kind, "", _CALLS)) == _CALLS
    assert tool_calls(make_assistant(kind, "no calls")) == []
    assert tool_calls(make_user_text(kind, "hi")) == []
    assert tool_calls(make_tool_result(kind, "c1", "search", "ok")) == []


@pytest.mark.parametrize("kind", KINDS)
def test_tool_results_of_other_messages_are_empty(kind: MessageKind) -> None:
    assert tool_results(make_user_text(kind, "hi")) == []
    assert tool_results(make_assistant(kind, "hi", _CALLS)) == []


# --- building ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("output", "blocks"),
    [
        ("3 cats", [TextBlock(text="3 cats")]),
        ("", []),
        ([TextBlock(text="see"), _IMAGE], [TextBlock(text="see"), _IMAGE]),
        ([_IMAGE, TextBlock(text="caption")], [_IMAGE, TextBlock(text="caption")]),
    ],
    ids=["text", "empty", "text_then_media", "media_then_text"],
)
@pytest.mark.parametrize("state", ["success", "error", "interrupted", "denied"])
def test_make_tool_result(kind: MessageKind, output: Any, blocks: list[Any], state: Any) -> None:
    msg = make_tool_result(kind, "c9", "search", output, state, id="t1")
    assert msg.kind == kind
    assert msg.id == "t1"
    assert is_tool_result(msg)
    assert not is_user(msg)
    assert tool_results(msg) == [ToolResult("c9", "search", blocks, state)]
    assert tool_results(msg)[0].text == "\n".join(b.text for b in blocks if b.type == "text")


def test_make_tool_result_shapes() -> None:
    flat = make_tool_result("flat", "c1", "search", [TextBlock(text="see"), _IMAGE])
    assert isinstance(flat, FlatMessage)
    assert (flat.role, flat.content, flat.parts) == ("tool", "see", [_IMAGE])
    assert (flat.tool_call_id, flat.tool_name) == ("c1", "search")
    agentic = make_tool_result("agentic", "c1", "search", "ok")
    assert isinstance(agentic, AgenticMessage)
    assert agentic.role == "user"
    assert agentic.blocks == [
        ToolResultBlock(call_id="c1", name="search", output=[TextBlock(text="ok")])
    ]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("role", ["system", "user", "assistant"])
def test_make_text(kind: MessageKind, role: Any) -> None:
    msg = make_text(kind, role, "words", id="m1", name="ada")
    assert (msg.kind, msg.role, msg.id, msg.name) == (kind, role, "m1", "ada")
    assert text_of(msg) == "words"


@pytest.mark.parametrize("kind", KINDS)
def test_make_user_text(kind: MessageKind) -> None:
    msg = make_user_text(kind, "hello", id="u1")
    assert (msg.kind, msg.role, msg.id) == (kind, "user", "u1")
    assert is_user(msg)
    assert text_of(msg) == "hello"


@pytest.mark.parametrize("kind", KINDS)
def test_make_assistant(kind: MessageKind) -> None:
    msg = make_assistant(kind, "answer", _CALLS, reasoning="why", id="a1", name="bot")
    assert (msg.kind, msg.role, msg.id, msg.name) == (kind, "assistant", "a1", "bot")
    assert (text_of(msg), reasoning_of(msg), tool_calls(msg)) == ("answer", "why", _CALLS)
    if isinstance(msg, AgenticMessage):
        assert [b.type for b in msg.blocks] == ["reasoning", "text", *["tool_call"] * 3]
    empty = make_assistant(kind)
    assert (text_of(empty), reasoning_of(empty), tool_calls(empty)) == ("", "", [])


@pytest.mark.parametrize("kind", KINDS)
def test_make_assistant_keeps_blocks_in_order(kind: MessageKind) -> None:
    blocks = [TextBlock(text="before"), _IMAGE, TextBlock(text="after")]
    msg = make_assistant(kind, blocks=blocks, name="bot")
    assert text_of(msg) == "before\nafter" and msg.name == "bot"
    assert to_kind([msg], "agentic")[0].blocks == blocks  # type: ignore[union-attr]
    if isinstance(msg, FlatMessage):  # the leading text is the content, as to_flat writes it
        assert (msg.content, msg.parts) == ("before", blocks[1:])
        assert to_kind([to_kind([msg], "agentic")[0]], "flat") == [msg]
    full = make_assistant(kind, "lead", _CALLS[:1], reasoning="why", blocks=[_IMAGE])
    assert [b.type for b in to_kind([full], "agentic")[0].blocks] == [  # type: ignore[union-attr]
        "reasoning",
        "text",
        "image",
        "tool_call",
    ]


@pytest.mark.parametrize("kind", KINDS)
def test_make_hint(kind: MessageKind) -> None:
    msg = make_hint(kind, "3 passages follow", "rag", id="rag-1")
    assert (msg.kind, msg.role, msg.id) == (kind, "user", "rag-1")
    assert is_hint(msg)
    assert not is_user(msg)
    assert text_of(msg) == "3 passages follow"
    if isinstance(msg, FlatMessage):
        assert msg.metadata == {HINT_METADATA_KEY: "rag"}
    else:
        (block,) = msg.blocks
        assert block.type == "hint"
        assert (block.source, block.id) == ("rag", "rag-1")


# --- conversations -----------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_unanswered_tool_calls(kind: MessageKind) -> None:
    head = [make_user_text(kind, "go"), make_assistant(kind, "", _CALLS[:2])]
    mixed = _mixed_user(kind)  # answers c1 and c2
    tail = [
        make_assistant(kind, "", [_CALLS[2], ToolCall(id="c4", name="t")]),
        make_tool_result(kind, "c4", "t", "done"),
    ]
    assert unanswered_tool_calls(head) == _CALLS[:2]
    assert unanswered_tool_calls(head + mixed) == []
    assert unanswered_tool_calls(head + mixed + tail) == [_CALLS[2]]
    assert unanswered_tool_calls([]) == []


@pytest.mark.parametrize("kind", KINDS)
def test_a_result_before_its_call_does_not_answer_it(kind: MessageKind) -> None:
    convo = [make_tool_result(kind, "c1", "search", "early"), make_assistant(kind, "", _CALLS)]
    assert unanswered_tool_calls(convo) == _CALLS


@pytest.mark.parametrize("kind", KINDS)
def test_unanswered_tool_calls_in_call_order_across_messages(kind: MessageKind) -> None:
    convo = [make_assistant(kind, "", _CALLS[:2]), make_assistant(kind, "", _CALLS[2:])]
    assert unanswered_tool_calls(convo) == _CALLS


# --- estimate and copy -------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_estimate_tokens(kind: MessageKind) -> None:
    assert estimate_tokens(make_user_text(kind, "abcdefgh")) == 4 + 2
    assert estimate_tokens([]) == 0
    with_image = make_tool_result(kind, "c1", "t", [TextBlock(text="abcd"), _IMAGE])
    assert estimate_tokens(with_image) == 4 + 1 + 256
    calls = make_assistant(
        kind, "abcd", [ToolCall(id="c", name="ab", arguments="cd")], reasoning="x"
    )
    assert estimate_tokens(calls) == 4 + (4 + 1 + 4) // 4
    msgs = [make_user_text(kind, "abcd"), with_image]
    assert estimate_tokens(msgs) == estimate_tokens(msgs[0]) + estimate_tokens(msgs[1])
    assert estimate_tokens(iter(msgs)) == estimate_tokens(msgs)


@pytest.mark.parametrize("kind", KINDS)
def test_copy_message_is_deep(kind: MessageKind) -> None:
    original = make_assistant(kind, "answer", _CALLS, reasoning="why", id="a1")
    original.metadata = {"tags": ["x"], "nested": {"n": 1}}
    if isinstance(original, FlatMessage):
        original.parts = [
            ImageBlock(source=InlineSource(data=b"\x89PNG", mime_type="image/png"), metadata={})
        ]
    else:
        original.blocks.append(
            ImageBlock(source=InlineSource(data=b"\x89PNG", mime_type="image/png"), metadata={})
        )
    snapshot = original.model_dump()
    copy = copy_message(original)
    assert copy == original
    assert copy is not original

    assert copy.metadata is not None
    copy.metadata["tags"].append("y")
    copy.metadata["nested"]["n"] = 2
    if isinstance(copy, FlatMessage):
        copy.tool_calls[0].name = "changed"
        copy.tool_calls.append(ToolCall(id="c9", name="t"))
        image: Any = copy.parts[0]
    else:
        text = copy.blocks[1]
        assert isinstance(text, TextBlock)
        text.text = "changed"
        copy.blocks.append(TextBlock(text="more"))
        image = copy.blocks[-2]
    assert isinstance(image, ImageBlock)
    assert image.metadata is not None
    image.name = "changed"
    image.metadata["k"] = "v"
    copy.id = "a2"
    assert original.model_dump() == snapshot


@pytest.mark.parametrize("kind", KINDS)
def test_copy_of_a_mixed_user_message_is_deep(kind: MessageKind) -> None:
    msgs = _mixed_user(kind)
    snapshot = [m.model_dump() for m in msgs]
    copies = [copy_message(m) for m in msgs]
    assert copies == msgs
    for c in copies:
        for result in tool_results(c):
            result.output.clear()  # tool_results hands out copies of the list
        if isinstance(c, AgenticMessage):
            for b in c.blocks:
                if isinstance(b, ToolResultBlock):
                    b.output.append(TextBlock(text="extra"))
        elif c.parts:
            c.parts.clear()
    assert [m.model_dump() for m in msgs] == snapshot


# --- one algorithm: both kinds agree -----------------------------------------------------


def _answers(msgs: list[Message]) -> dict[str, Any]:
    """What a middleware would ask about a conversation."""
    return {
        "system": [is_system(m) for m in msgs],
        "assistant": [is_assistant(m) for m in msgs],
        "user": sum(is_user(m) for m in msgs),
        "hint": sum(is_hint(m) for m in msgs),
        "user_text": [text_of(m) for m in msgs if not is_tool_result(m)],
        "reasoning": [reasoning_of(m) for m in msgs],
        "calls": [c for m in msgs for c in tool_calls(m)],
        "results": [r for m in msgs for r in tool_results(m)],
        "unanswered": unanswered_tool_calls(msgs),
    }


@settings(max_examples=300)
@given(msg=hs.flat_messages())
def test_helpers_agree_on_a_flat_message_and_its_agentic_form(msg: FlatMessage) -> None:
    agentic = flat_to_agentic(msg)
    if is_hint(msg):  # a flat hint is tagged in metadata; see test_schema_convert
        return
    assert _predicates(agentic) == _predicates(msg)
    assert _answers([agentic]) == _answers([msg])
    assert estimate_tokens(agentic) == estimate_tokens(msg)


def _result(r: ToolResult) -> tuple[Any, ...]:
    """A tool result up to what flat drops: output block ids and empty text blocks."""
    output = [o.model_copy(update={"id": ""}) for o in r.output if o.type != "text" or o.text]
    return (r.call_id, r.name, r.state, output)


@settings(max_examples=300)
@given(msg=hs.agentic_messages())
def test_helpers_agree_on_an_agentic_message_and_its_flat_form(msg: AgenticMessage) -> None:
    flat: list[Message] = list(to_kind([msg], "flat"))
    a, f = _answers([msg]), _answers(flat)
    for key in ("calls", "unanswered"):
        assert a[key] == f[key]
    assert [_result(r) for r in a["results"]] == [_result(r) for r in f["results"]]
    assert is_tool_result(msg) == any(is_tool_result(m) for m in flat)
    assert [m.role for m in flat if not is_tool_result(m)] in ([], [msg.role])
    if not any(b.type == "hint" for b in msg.blocks):  # hints become user text in flat
        assert is_user(msg) == any(is_user(m) for m in flat)


@pytest.mark.parametrize("kind", ["flat", "agentic"])
def test_a_tool_result_has_no_text_in_either_kind(kind: MessageKind) -> None:
    msg = make_tool_result(kind, "c1", "echo", "the output")
    assert text_of(msg) == ""
    assert [r.text for r in tool_results(msg)] == ["the output"]


@pytest.mark.parametrize(
    ("only", "user", "result"),
    [("all", "HI", "OK"), ("own", "HI", "ok"), ("tool_results", "hi", "OK")],
)
def test_map_text_takes_the_texts_asked_for(
    kind: MessageKind, only: Any, user: str, result: str
) -> None:
    said = make_user_text(kind, "hi")
    answered = make_tool_result(kind, "c1", "search", "ok")
    before = (said.model_dump(), answered.model_dump())
    assert text_of(map_text(said, str.upper, only=only)) == user
    assert [r.text for r in tool_results(map_text(answered, str.upper, only=only))] == [result]
    assert (said.model_dump(), answered.model_dump()) == before  # the originals are untouched
    assert map_text(said, str.lower, only=only) is said  # nothing changed: the same object


def test_map_text_splits_an_agentic_user_message_by_block() -> None:
    mixed = AgenticMessage(
        role="user",
        blocks=[
            ToolResultBlock(call_id="c1", name="search", output=[TextBlock(text="ok")]),
            TextBlock(text="hi"),
        ],
    )
    own = map_text(mixed, str.upper, only="own")
    assert (text_of(own), [r.text for r in tool_results(own)]) == ("HI", ["ok"])
    results = map_text(mixed, str.upper, only="tool_results")
    assert (text_of(results), [r.text for r in tool_results(results)]) == ("hi", ["OK"])
