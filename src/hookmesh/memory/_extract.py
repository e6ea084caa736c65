"""Turning conversation messages into facts: a chat model's JSON, validated, or the user's
turns verbatim."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from hookmesh.agent.models import ChatModel, answer_text, json_answer
from hookmesh.schema import Message, is_assistant, is_user, make_text, text_of

from ._types import ExtractionOutcome, MemoryOrigin

log = logging.getLogger("hookmesh.memory")

DEFAULT_EXTRACTION_INSTRUCTION = (
    "You maintain a long-term memory about a user. From the conversation below, extract the "
    "durable facts worth remembering in later conversations: the user's preferences, personal "
    "details, plans, decisions, constraints and relationships. Write each fact as one short, "
    'self-contained sentence about the user (for example "The user is vegetarian."). Skip '
    "greetings, questions that reveal nothing, transient details, and the assistant's own "
    "statements unless the user confirmed them. Never record passwords or other secrets.\n"
    'Answer with JSON only, exactly of the form {"facts": ["...", "..."]}; answer '
    '{"facts": []} when nothing is worth remembering.'
)
"""The extraction model's default system instruction."""


class _Facts(BaseModel):
    """The answer the extraction model must give."""

    model_config = ConfigDict(extra="ignore", strict=True)

    facts: list[str]
    """The facts, each one sentence."""


@dataclass(frozen=True, slots=True)
class Fact:
    """A fact to store, with where it came from."""

    text: str
    """The fact."""
    origin: MemoryOrigin
    """How it was obtained."""
    sources: tuple[str, ...] = ()
    """Ids of the messages it came from."""


def transcript(messages: Sequence[Message]) -> str:
    """The user's and the assistant's text, one labelled line block per message (either kind)."""
    lines = []
    for msg in messages:
        text = text_of(msg).strip()
        if not text:
            continue
        if is_user(msg):
            lines.append(f"[user] {text}")
        elif is_assistant(msg):
            lines.append(f"[assistant] {text}")
    return "\n\n".join(lines)


def verbatim(messages: Sequence[Message], max_chars: int) -> list[Fact]:
    """Each user turn with text, as it was (cut to `max_chars`)."""
    out = []
    for msg in messages:
        text = text_of(msg).strip() if is_user(msg) else ""
        if text:
            out.append(Fact(text[:max_chars], "verbatim", (msg.id,) if msg.id else ()))
    return out


def parse_facts(answer: str, max_facts: int, max_chars: int) -> list[str] | None:
    """The facts in a model's answer, or None when it is not ``{"facts": [str, ...]}``.

    A surrounding Markdown code fence is tolerated; blank and repeated facts are dropped,
    long ones cut to `max_chars`, and at most `max_facts` kept.
    """
    parsed = json_answer(answer, _Facts)
    if parsed is None:
        return None
    seen: dict[str, None] = {}
    for fact in parsed.facts:
        fact = fact.strip()[:max_chars].strip()
        if fact:
            seen.setdefault(fact, None)
    return list(seen)[:max_facts]


async def extract(
    messages: Sequence[Message],
    model: ChatModel | None,
    *,
    instruction: str = DEFAULT_EXTRACTION_INSTRUCTION,
    timeout: float = 60.0,
    max_facts: int = 64,
    max_chars: int = 8000,
) -> tuple[list[Fact], ExtractionOutcome]:
    """Facts from `messages`, and how they were obtained.

    With a model: its JSON facts (sources: every given message id). When the answer is not
    valid, or the call fails or times out, the user's turns verbatim (``fallback``), so a
    turn is never lost. Without a model: the user's turns verbatim (``no_model``).
    """
    if model is None:
        return verbatim(messages, max_chars), "no_model"
    text = transcript(messages)
    if not text:
        return [], "extracted"
    prompt = [
        make_text("flat", "system", instruction),
        make_text("flat", "user", f"Conversation:\n\n{text}"),
    ]
    try:
        async with asyncio.timeout(timeout):
            answer = await answer_text(model, prompt, "flat")
    except Exception as exc:
        log.warning("memory extraction failed; storing the user's turns verbatim: %s", exc)
        return verbatim(messages, max_chars), "fallback"
    facts = parse_facts(answer, max_facts, max_chars)
    if facts is None:
        log.warning(
            "the extraction model's answer is not {\"facts\": [...]} JSON; storing the user's "
            "turns verbatim (answer starts %r)",
            answer[:80],
        )
        return verbatim(messages, max_chars), "fallback"
    sources = tuple(m.id for m in messages if m.id and (is_user(m) or is_assistant(m)))
    return [Fact(f, "extracted", sources) for f in facts], "extracted"
