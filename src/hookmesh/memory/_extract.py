"""Turning conversation messages into facts: a chat model's JSON, validated, or the user's
own statements verbatim."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from hookmesh.models import ChatModel, answer_text, json_answer
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


_SENTENCE_END = re.compile(r"(?<=[.!?\u3002\uff01\uff1f])\s+|\n+")
_QUESTION_OPENER = re.compile(
    r"^(who|whom|whose|what|which|when|where|why|how|do|does|did|can|could|would|will|shall|"
    r"should|is|are|was|were|am|have|has)\b",
    re.IGNORECASE,
)
_PLEASANTRY = re.compile(
    r"^(hi|hello|hey|hiya|yo|thanks|thank|thx|cheers|bye|goodbye|ok|okay|sure|yes|no|yeah|"
    r"nope|great|cool|nice|good (morning|afternoon|evening|night))\b",
    re.IGNORECASE,
)
_MIN_WORDS = 3
_PLEASANTRY_WORDS = 5


def statement(sentence: str) -> bool:
    """Whether a sentence of the user's reads as something worth recalling: not a question
    (a ``?`` or a question opener), not a greeting or thanks of a few words, and at least
    three words long. Without a model this is all the judgement memory has."""
    words = sentence.split()
    if len(words) < _MIN_WORDS or sentence.rstrip().endswith(("?", "\uff1f")):
        return False
    if sentence.lstrip().startswith("\u00bf") or _QUESTION_OPENER.match(sentence.lstrip()):
        return False
    return not (len(words) <= _PLEASANTRY_WORDS and _PLEASANTRY.match(sentence.lstrip()))


def verbatim(messages: Sequence[Message], max_facts: int, max_chars: int) -> list[Fact]:
    """The user's statements (`statement`), each sentence as written (cut to `max_chars`),
    at most `max_facts`; questions, greetings and the assistant's turns are not kept."""
    out: list[Fact] = []
    for msg in messages:
        if not is_user(msg):
            continue
        sources = (msg.id,) if msg.id else ()
        for sentence in _SENTENCE_END.split(text_of(msg)):
            sentence = sentence.strip()
            if statement(sentence):
                out.append(Fact(sentence[:max_chars].strip(), "verbatim", sources))
                if len(out) == max_facts:
                    return out
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
    valid, or the call fails or times out, the user's statements verbatim (``fallback``),
    so what the user said about themselves is not lost. Without a model: the user's
    statements verbatim (``no_model``); see `statement` for what counts as one.
    """
    if model is None:
        return verbatim(messages, max_facts, max_chars), "no_model"
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
        log.warning("memory extraction failed; storing the user's statements verbatim: %s", exc)
        return verbatim(messages, max_facts, max_chars), "fallback"
    facts = parse_facts(answer, max_facts, max_chars)
    if facts is None:
        log.warning(
            "the extraction model's answer is not {\"facts\": [...]} JSON; storing the user's "
            "statements verbatim (answer starts %r)",
            answer[:80],
        )
        return verbatim(messages, max_facts, max_chars), "fallback"
    sources = tuple(m.id for m in messages if m.id and (is_user(m) or is_assistant(m)))
    return [Fact(f, "extracted", sources) for f in facts], "extracted"
