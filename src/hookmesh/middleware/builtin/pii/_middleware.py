"""PII guard: e-mail addresses, phone numbers, cards, IBANs, IP addresses and custom patterns
redacted, masked, hashed or blocked in user input, tool results and model output."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Collection, Mapping
from typing import TYPE_CHECKING, Any, Literal

from hookmesh.middleware import ActingArgs, ActingNext, AgentView, ReasoningArgs, ReasoningNext
from hookmesh.middleware._base import Middleware
from hookmesh.middleware.builtin.pii._detect import (
    BUILTIN,
    STRATEGIES,
    Detector,
    PIIDetectedError,
    Scrubber,
    Strategy,
    StreamMasker,
)

__all__ = ["TARGETS", "PIIDetectedError", "PIIMiddleware", "Strategy", "Target"]
from hookmesh.schema import (
    AgentEvent,
    ReasoningBlockDeltaEvent,
    TextBlockDeltaEvent,
    ToolResultDeltaEvent,
    is_assistant,
    is_system,
    map_text,
)

if TYPE_CHECKING:
    pass

Target = Literal["input", "tool_results", "output"]
"""Where to look: user messages (hints included), tool results, the model's output."""
TARGETS: tuple[Target, ...] = ("input", "tool_results", "output")
DEFAULT_CUSTOM_MAX_LENGTH = 100
"""The longest match assumed for a custom pattern without its own bound."""

_DELTAS = {
    "text_block_delta": "text_block_end",
    "reasoning_block_delta": "reasoning_block_end",
}


def _custom(name: str, spec: str | Mapping[str, Any]) -> Detector:
    if isinstance(spec, str):
        pattern, max_length = spec, DEFAULT_CUSTOM_MAX_LENGTH
    else:
        pattern, max_length = (
            spec["pattern"],
            int(spec.get("max_length", DEFAULT_CUSTOM_MAX_LENGTH)),
        )
    if name in BUILTIN:
        raise ValueError(f"custom pattern {name!r} has the name of a built-in type")
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"custom pattern {name!r} is not a valid regex: {exc}") from None
    if max_length < 1:
        raise ValueError(f"custom pattern {name!r}: max_length must be >= 1")
    return Detector(name, compiled, max_length)


class PIIMiddleware(Middleware):
    """Keeps personal data out of the model, the conversation and the client's stream.

    Detects e-mail addresses, phone numbers, payment card numbers (Luhn-checked), IBANs
    (checksum-checked), IPv4/IPv6 addresses and `custom` regexes, and replaces each by its
    strategy: ``redact`` (``[REDACTED_EMAIL]``), ``mask`` (``***@******e.com``: all but the
    last four letters and digits), ``hash`` (``<email:1a2b3c4d5e>``, a stable SHA-256
    prefix) or ``block`` (the reply ends with ``PII_DETECTED``).

    Where (`apply_to`): ``input``: the user's text and hints (not the tool results a user
    message carries) are rewritten in the context before each model call; ``tool_results``:
    a tool's streamed output is masked as it passes (so its result in the context is too),
    and tool results that reached the context otherwise (sent by the client) are rewritten
    before each model call; ``output``: the model's streamed text and
    reasoning are masked as they pass, and its message in the context is rewritten after
    the step. Every text-bearing block of both kinds is covered; tool call arguments are not
    rewritten (the tool must get what the model meant; guard the tool instead). A stream is
    held back by at most the longest possible match (254 characters with e-mail on; 45
    without e-mail and custom patterns).

    State: ``{"clean": n}`` (context messages already checked) in
    ``middle_context["pii"][reply_id]``. Remote: declares `needs_context` (it rewrites the
    context) and subscribes to the text deltas and block ends it masks.

    Not supported: text inside media (images, documents); names and street addresses (no
    NER: add custom patterns).

    Example:
        >>> mw = PIIMiddleware(strategy="mask", strategies={"credit_card": "block"},
        ...                    custom={"ticket": r"TICKET-\\d{6}"})
        >>> mw.strategies["credit_card"], mw.strategies["email"]
        ('block', 'mask')

    Args:
        types: Built-in types to detect (``email``, ``phone``, ``credit_card``, ``iban``,
            ``ip``).
        custom: Extra types by name: a regex, or ``{"pattern", "max_length"}``.
        strategy: The strategy of every type without its own.
        strategies: Per type name, a strategy that replaces `strategy`.
        apply_to: Where to look: ``input``, ``tool_results``, ``output``.
    """

    needs_context = True
    subscriptions: Mapping[str, tuple[str, ...]] = {
        "on_reasoning": (*_DELTAS, *_DELTAS.values()),
        "on_acting": ("tool_result_delta", "tool_result_end"),
    }

    def __init__(
        self,
        types: Collection[str] = tuple(BUILTIN),
        custom: Mapping[str, str | Mapping[str, Any]] | None = None,
        strategy: Strategy = "redact",
        strategies: Mapping[str, Strategy] | None = None,
        apply_to: Collection[Target] = TARGETS,
    ) -> None:
        unknown = set(types) - set(BUILTIN)
        if unknown:
            raise ValueError(
                f"unknown PII type(s) {', '.join(sorted(unknown))}; built in: {', '.join(BUILTIN)}"
            )
        detectors = [d for name, d in BUILTIN.items() if name in types]
        detectors += [_custom(name, spec) for name, spec in (custom or {}).items()]
        if not detectors:
            raise ValueError("PIIMiddleware needs at least one type to detect")
        names = {d.name for d in detectors}
        self.strategies: dict[str, Strategy] = {name: strategy for name in names}
        for name, value in (strategies or {}).items():
            if name not in names:
                raise ValueError(f"strategy for {name!r}, which is not detected")
            self.strategies[name] = value
        bad = {s for s in self.strategies.values() if s not in STRATEGIES}
        if bad:
            raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, not {bad}")
        wrong = set(apply_to) - set(TARGETS)
        if wrong or not apply_to:
            raise ValueError(f"apply_to takes some of {', '.join(TARGETS)}, not {sorted(wrong)}")
        self.apply_to = frozenset(apply_to)
        self.scrubber = Scrubber(detectors, self.strategies)

    def middleware_key(self) -> str:
        return "pii"

    def _rewrite(self, agent: AgentView, start: int, *, output: bool) -> None:
        """Scrub the context's messages from `start` on: before a call, the user's text and
        hints (``input``) and tool results (``tool_results``), each only when chosen; after
        it, the model's messages."""
        context = agent.state.context
        only: Literal["all", "own", "tool_results"] = "all"
        if not output and "input" not in self.apply_to:
            only = "tool_results"
        elif not output and "tool_results" not in self.apply_to:
            only = "own"
        for i in range(start, len(context)):
            msg = context[i]
            if is_system(msg) or is_assistant(msg) != output:
                continue
            context[i] = map_text(msg, self.scrubber.scrub, only=only)

    async def on_reasoning(
        self, agent: AgentView, kwargs: ReasoningArgs, next_handler: ReasoningNext
    ) -> AsyncIterator[AgentEvent]:
        """Scrub new input before the step, mask the model's stream, scrub its message after.

        Wraps one reasoning step (the model call inside it). Errors (a ``block``) fail
        closed: the reply ends with ``PII_DETECTED``.
        """
        state = self.state(agent)
        context = agent.state.context
        clean = state.get("clean", 0)
        if self.apply_to & {"input", "tool_results"}:
            self._rewrite(agent, clean if clean <= len(context) else 0, output=False)
        before = len(context)
        if "output" not in self.apply_to:
            async for event in next_handler():
                yield event
        else:
            async for event in self._masked(next_handler(), _DELTAS, "block_id"):
                yield event
            self._rewrite(agent, before, output=True)
        self.state(agent)["clean"] = len(agent.state.context)

    def on_acting(
        self, agent: AgentView, kwargs: ActingArgs, next_handler: ActingNext
    ) -> AsyncIterator[AgentEvent]:
        """Mask a tool's streamed output, so its result in the context is masked too.

        Wraps one tool's execution; the context write (from these events) comes after.
        """
        if "tool_results" not in self.apply_to:
            return next_handler()
        return self._masked(next_handler(), {"tool_result_delta": "tool_result_end"}, "call_id")

    async def _masked(
        self, events: AsyncIterator[AgentEvent], ends: Mapping[str, str], key: str
    ) -> AsyncIterator[AgentEvent]:
        maskers: dict[str, tuple[StreamMasker, AgentEvent]] = {}
        closing = set(ends.values())
        async for event in events:
            if event.type not in ends and event.type not in closing:
                yield event
                continue
            stream = getattr(event, key)
            text = _text(event)
            if text:
                masker = maskers[stream][0] if stream in maskers else StreamMasker(self.scrubber)
                maskers[stream] = (masker, event)
                safe = masker.feed(text)
                if safe:
                    yield _with_text(event, safe)
                continue
            # A block's end, or media between its text: first what is held back.
            held = maskers.pop(stream, None)
            if held is not None and (rest := held[0].flush()):
                yield _with_text(held[1], rest)
            yield event


def _text(event: AgentEvent) -> str:
    if isinstance(event, TextBlockDeltaEvent | ReasoningBlockDeltaEvent):
        return event.delta
    if isinstance(event, ToolResultDeltaEvent):
        return event.text
    return ""


def _with_text(event: AgentEvent, text: str) -> AgentEvent:
    field = "text" if isinstance(event, ToolResultDeltaEvent) else "delta"
    return event.model_copy(update={field: text})
