"""PII: detectors, strategies, stream masking, and the middleware on both kinds, in process
and via a sidecar."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hookmesh.agent import Agent, AgentState, tool
from hookmesh.middleware.builtin.pii import PIIDetectedError, PIIMiddleware
from hookmesh.middleware.builtin.pii._detect import BUILTIN, Scrubber, StreamMasker
from hookmesh.models import ScriptedChatModel, ScriptedTurn
from hookmesh.schema import (
    AgenticMessage,
    Message,
    MessageKind,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    is_user,
    reasoning_of,
    text_of,
    to_kind,
    tool_results,
)
from tests.agent_helpers import collect
from tests.conftest import Attach

pytestmark = pytest.mark.timeout(60)

CARD = "4111 1111 1111 1111"  # Luhn-valid test card
IBAN = "DE89 3704 0044 0532 0130 00"  # checksum-valid example IBAN


def _redactor(**strategies: Any) -> Scrubber:
    names = {name: strategies.get(name, "redact") for name in BUILTIN}
    return Scrubber(list(BUILTIN.values()), names)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("mail ana@example.co.uk now", "mail [REDACTED_EMAIL] now"),
        (f"card {CARD}.", "card [REDACTED_CREDIT_CARD]."),
        ("card 4111 1111 1111 1112.", "card 4111 1111 1111 1112."),  # Luhn fails
        (f"pay to {IBAN}", "pay to [REDACTED_IBAN]"),
        ("pay to DE88 3704 0044 0532 0130 00", "pay to DE88 3704 0044 0532 0130 00"),
        ("from 192.168.10.20 and ::1", "from [REDACTED_IP] and [REDACTED_IP]"),
        ("version 1.2.3.4.5 or 999.1.1.1", "version 1.2.3.4.5 or 999.1.1.1"),
        ("call +47 912 34 567 or (555) 123-4567", "call [REDACTED_PHONE] or [REDACTED_PHONE]"),
        ("on 2024-01-15 at 10:30, order 12345", "on 2024-01-15 at 10:30, order 12345"),
        (f"{CARD} {CARD}", "[REDACTED_CREDIT_CARD] [REDACTED_CREDIT_CARD]"),
        ("amex 3782 822463 10005", "amex [REDACTED_CREDIT_CARD]"),
        (f"{IBAN} AND MORE", "[REDACTED_IBAN] AND MORE"),
        (f"ref XX00 {IBAN}", "ref XX00 [REDACTED_IBAN]"),  # a failed candidate hides none
    ],
)
def test_detectors_find_pii_and_leave_the_rest(text: str, expected: str) -> None:
    assert _redactor().scrub(text) == expected


def test_strategies() -> None:
    text = f"ana@example.com {CARD}"
    assert _redactor(email="mask", credit_card="mask").scrub(text) == (
        "***@******e.com **** **** **** 1111"
    )
    hashed = _redactor(email="hash").scrub("ana@example.com")
    assert hashed.startswith("<email:") and len(hashed) == len("<email:>") + 10
    assert _redactor(email="hash").scrub("ana@example.com") == hashed  # stable
    with pytest.raises(PIIDetectedError) as blocked:
        _redactor(credit_card="block").scrub(f"x {CARD}")
    assert (blocked.value.reason, blocked.value.metadata) == (
        "PII_DETECTED",
        {"piiType": "credit_card"},
    )


@given(
    with_email=st.booleans(),
    pieces=st.lists(
        st.sampled_from(["ana@example.com", CARD, " ", "hi ", "+47 912 34 567", "x", "\n", IBAN]),
        max_size=40,
    ),
    cuts=st.lists(st.integers(min_value=1, max_value=9), min_size=1, max_size=40),
)
def test_a_masked_stream_equals_the_masked_text_and_holds_back_little(
    with_email: bool, pieces: list[str], cuts: list[int]
) -> None:
    # Without e-mail the hold is short (45), so the stream is cut inside matches often.
    names = BUILTIN if with_email else [n for n in BUILTIN if n != "email"]
    scrubber = Scrubber([BUILTIN[n] for n in names], dict.fromkeys(BUILTIN, "redact"))
    if not with_email:
        pieces = [p for p in pieces if "@" not in p]
    text = "".join(pieces)
    masker = StreamMasker(scrubber)
    out: list[str] = []
    fed = 0
    i = 0
    while fed < len(text):
        size = cuts[i % len(cuts)]
        i += 1
        out.append(masker.feed(text[fed : fed + size]))
        fed += size
        # What is not out yet is at most the longest possible match.
        assert masker.held <= scrubber.hold
    out.append(masker.flush())
    assert "".join(out) == scrubber.scrub(text)


def test_settings_are_checked_when_built() -> None:
    with pytest.raises(ValueError, match="unknown PII type"):
        PIIMiddleware(types=["ssn"])
    with pytest.raises(ValueError, match="not a valid regex"):
        PIIMiddleware(custom={"x": "("})
    with pytest.raises(ValueError, match="strategy must be one of"):
        PIIMiddleware(strategy="shred")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not detected"):
        PIIMiddleware(types=["email"], strategies={"phone": "mask"})
    with pytest.raises(ValueError, match="apply_to"):
        PIIMiddleware(apply_to=["logs"])  # type: ignore[list-item]


# --- the middleware ----------------------------------------------------------------------------


@tool(read_only=True)
def lookup(name: str) -> str:
    """Find a customer.

    Args:
        name: Who.
    """
    return f"{name}: card {CARD}, mail bo@example.org"


def _recording(prompts: list[list[Message]], turns: list[ScriptedTurn]) -> Any:
    def script(messages: Sequence[Message], tools: Any, tool_choice: str) -> ScriptedTurn:
        prompts.append(list(messages))
        return turns[len(prompts) - 1]

    return script


@pytest.mark.parametrize("stream", [False, True])
async def test_input_tool_results_and_output_are_masked(
    kind: MessageKind, attach: Attach, stream: bool
) -> None:
    prompts: list[list[Message]] = []
    turns = [
        ScriptedTurn(tool_calls=[("lookup", {"name": "Bo"})]),
        ScriptedTurn(text="Reach Bo at +47 912 34 567 today.", reasoning="ip is 10.0.0.7"),
    ]
    mw = await attach(PIIMiddleware(strategies={"phone": "mask"}, custom={"ticket": r"T-\d{4}"}))
    model = ScriptedChatModel(_recording(prompts, turns), stream=stream, chunk_size=3)
    agent = Agent(model, kind=kind, tools=[lookup], middlewares=[mw])
    events = await collect(agent.reply("I am ana@example.com, ticket T-1234"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]

    # The model never saw the user's address or the tool's card.
    seen = "\n".join(text_of(m) + " ".join(r.text for r in tool_results(m)) for m in prompts[1])
    assert "I am [REDACTED_EMAIL], ticket [REDACTED_TICKET]" in seen
    assert "Bo: card [REDACTED_CREDIT_CARD], mail [REDACTED_EMAIL]" in seen
    assert "@" not in seen and CARD not in seen

    # The client's stream: tool output and model output masked.
    tool_text = "".join(e.text for e in events if e.type == "tool_result_delta")  # type: ignore[union-attr]
    assert tool_text == "Bo: card [REDACTED_CREDIT_CARD], mail [REDACTED_EMAIL]"
    answer = "".join(e.delta for e in events if e.type == "text_block_delta")  # type: ignore[union-attr]
    assert answer == "Reach Bo at +** *** *4 567 today."
    thinking = "".join(e.delta for e in events if e.type == "reasoning_block_delta")  # type: ignore[union-attr]
    assert thinking == "ip is [REDACTED_IP]"

    # The stored conversation holds no PII either.
    stored = agent.state.context
    assert text_of(stored[0]) == "I am [REDACTED_EMAIL], ticket [REDACTED_TICKET]"
    assert text_of(stored[-1]) == "Reach Bo at +** *** *4 567 today."
    assert reasoning_of(stored[-1]) == "ip is [REDACTED_IP]"
    dump = "".join(m.model_dump_json() for m in stored)
    assert "ana@" not in dump and "912 34" not in dump and CARD not in dump


async def test_block_ends_the_reply_before_the_model_sees_it(
    kind: MessageKind, attach: Attach
) -> None:
    model = ScriptedChatModel(["never"])
    mw = await attach(PIIMiddleware(strategies={"iban": "block"}))
    agent = Agent(model, kind=kind, middlewares=[mw])
    events = await collect(agent.reply(f"send it to {IBAN}"))
    error = events[-1].error  # type: ignore[union-attr]
    assert (error.reason, error.metadata["piiType"]) == ("PII_DETECTED", "iban")
    assert model.calls == 0


async def test_only_the_chosen_targets_are_touched(kind: MessageKind, attach: Attach) -> None:
    mw = await attach(PIIMiddleware(apply_to=["output"]))
    agent = Agent(ScriptedChatModel(["write to cy@example.net"]), kind=kind, middlewares=[mw])
    await collect(agent.reply("I am ana@example.com"))
    assert text_of(agent.state.context[0]) == "I am ana@example.com"
    assert text_of(agent.state.context[-1]) == "write to [REDACTED_EMAIL]"


@pytest.mark.parametrize("target", ["input", "tool_results"])
async def test_input_is_the_users_text_and_tool_results_are_their_own_target(
    kind: MessageKind, attach: Attach, target: str
) -> None:
    # A user message carrying a tool result the client ran and text of its own (agentic: one
    # message, flat: a tool message and a user message), then a tool the model calls.
    history: list[Message] = [
        AgenticMessage(role="user", blocks=[TextBlock(text="find Bo")]),
        AgenticMessage(
            role="assistant",
            blocks=[ToolCallBlock(call_id="c1", name="lookup", arguments='{"name": "Bo"}')],
        ),
    ]
    mixed = AgenticMessage(
        role="user",
        blocks=[
            ToolResultBlock(call_id="c1", name="lookup", output=[TextBlock(text=f"card {CARD}")]),
            TextBlock(text="I am ana@example.com"),
        ],
    )
    prompts: list[list[Message]] = []
    turns = [ScriptedTurn(tool_calls=[("lookup", {"name": "Cy"})]), ScriptedTurn(text="ok")]
    mw = await attach(PIIMiddleware(apply_to=[target]))  # type: ignore[list-item]
    agent = Agent(
        ScriptedChatModel(_recording(prompts, turns)),
        kind=kind,
        tools=[lookup],
        middlewares=[mw],
        state=AgentState(context=to_kind(history, kind)),
    )
    events = await collect(agent.reply(mixed))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]

    for messages in (prompts[-1], agent.state.context):
        said = [text_of(m) for m in messages if is_user(m)]
        results = [r.text for m in messages for r in tool_results(m)]
        if target == "input":
            assert said == ["find Bo", "I am [REDACTED_EMAIL]"]
            assert results == [f"card {CARD}", f"Cy: card {CARD}, mail bo@example.org"]
        else:
            assert said == ["find Bo", "I am ana@example.com"]
            assert results == [
                "card [REDACTED_CREDIT_CARD]",
                "Cy: card [REDACTED_CREDIT_CARD], mail [REDACTED_EMAIL]",
            ]
