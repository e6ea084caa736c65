"""Context summarisation: replace old history by one model-written summary message."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from hookmesh.middleware import AgentView, CompressArgs, CompressNext
from hookmesh.middleware._base import FailureMode, Middleware
from hookmesh.middleware.builtin._support._retry import RetryPolicy
from hookmesh.models import ChatModel, answer_text
from hookmesh.schema import (
    CustomEvent,
    Message,
    MessageKind,
    estimate_tokens,
    is_system,
    is_user,
    make_text,
    make_user_text,
    text_of,
    tool_calls,
    tool_results,
)

if TYPE_CHECKING:
    pass

SUMMARY_METADATA_KEY = "hookmesh.summary"
"""Message metadata key (value ``True``) tagging the summary message."""
SUMMARY_EVENT = "hookmesh.summarization"
"""Name of the custom event emitted after each summarisation."""
SUMMARY_PREFIX = "Summary of the earlier conversation (it replaces the older messages):\n\n"
"""Text the summary message starts with, before the model's summary."""

DEFAULT_INSTRUCTION = (
    "You condense the transcript of a conversation between a user and an AI assistant that "
    "uses tools, so the assistant can carry on from your summary alone. Keep: what the user "
    "wants and every constraint they set; decisions made; facts learned from tool results "
    "(exact names, numbers, paths, identifiers); what has been done and what remains. Drop "
    "chit-chat and repetition. Write plain text, as short as completeness allows."
)
"""The summariser's default system instruction."""

_FIRST = "Summarise this conversation transcript:\n\n"
_EARLIER = "Summary of the earlier part of the conversation:\n\n"
_LATER = (
    "\n\nThe conversation continues below. Write one summary covering the earlier summary "
    "and this part:\n\n"
)
_MIN_SUMMARIZER_TOKENS = 256


class SummarizationError(RuntimeError):
    """The summariser failed on every attempt (or cannot run at all)."""


def _count(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, not {value!r}")
    return value


def _trigger(name: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an int >= 1 or None, not {value!r}")
    return value


class SummarizationMiddleware(Middleware):
    """Bounds the context by summarising its history once a threshold is crossed.

    Before each reasoning step, when the context's token estimate exceeds `max_tokens` or
    its message count exceeds `max_messages` (each trigger only when set; at least one must
    be), everything after the leading system messages is summarised by a chat model and
    replaced by ONE user-role summary message tagged ``{SUMMARY_METADATA_KEY: True}``,
    followed by the most recent user turns kept verbatim (same ids, original order) up to
    `keep_user_tokens` (and at most half of `max_tokens`, and few enough to stay under
    `max_messages`, so the result does not trigger again at once). Only the user's own
    turns are kept: tool results never are, so the kept tail never holds a result whose
    call was summarised away. Nothing happens when every message after the leading system
    ones would be kept anyway, or only a previous summary would go. A history longer than
    `summarizer_max_tokens` is summarised in chunks, each with the summary so far, so the
    summariser's own input stays under that bound. A failed model call (or an empty
    answer) is retried by `retry` (backoff with jitter); then the middleware raises
    `SummarizationError` and its `failure_mode` decides (``fail_closed``: the reply ends
    with an error; ``fail_open``: the context is left untouched and the reply goes on).

    State: a per-reply count of summaries in ``middle_context["summarization"][reply_id]``
    (``summaries``). A ``hookmesh.summarization`` custom event reports each summary.

    Not supported: media (the summariser reads text, tool calls and tool results, noting
    only how many media items a result had); reasoning text (not sent); keeping a user
    turn larger than the budget (it is summarised); an agentic user message that also
    carries tool results is summarised, not kept. In a sidecar there is no agent model:
    pass `model` there.

    Example:
        >>> from hookmesh.models import ScriptedChatModel
        >>> mw = SummarizationMiddleware(max_messages=40, model=ScriptedChatModel(["..."]))
        >>> (mw.max_tokens, mw.max_messages)
        (None, 40)

    Args:
        max_tokens: Summarise when the context's token estimate exceeds this; None: never
            on tokens.
        max_messages: Summarise when the context holds more messages; None: never on count.
        model: The summarising chat model; None uses the agent's own model (in process
            only).
        instruction: The summariser's system instruction.
        keep_user_tokens: Token budget of the recent user turns kept verbatim.
        summarizer_max_tokens: Bound of one summariser call's input (token estimate).
        retry: Attempts and backoff of each summariser call (a `RetryPolicy` or a mapping of
            its fields; any error is retried).
        failure_mode: ``fail_closed`` (default) or ``fail_open``.
    """

    needs_context = True

    def __init__(
        self,
        *,
        max_tokens: int | None = None,
        max_messages: int | None = None,
        model: ChatModel | None = None,
        instruction: str = DEFAULT_INSTRUCTION,
        keep_user_tokens: int = 2_000,
        summarizer_max_tokens: int = 100_000,
        retry: RetryPolicy | Mapping[str, Any] | None = None,
        failure_mode: FailureMode = "fail_closed",
    ) -> None:
        self.max_tokens = _trigger("max_tokens", max_tokens)
        self.max_messages = _trigger("max_messages", max_messages)
        if self.max_tokens is None and self.max_messages is None:
            raise ValueError(
                "SummarizationMiddleware needs a trigger: set max_tokens, max_messages or both"
            )
        if model is not None and not isinstance(model, ChatModel):
            raise ValueError(f"model must be a ChatModel or None, not {type(model).__name__}")
        self.model = model
        if not isinstance(instruction, str) or not instruction.strip():
            raise ValueError("instruction must be a non-empty string")
        self.instruction = instruction
        self.keep_user_tokens = _count("keep_user_tokens", keep_user_tokens, 0)
        self.summarizer_max_tokens = _count(
            "summarizer_max_tokens", summarizer_max_tokens, _MIN_SUMMARIZER_TOKENS
        )
        needed = estimate_tokens(make_text("flat", "system", instruction)) * 4
        if needed > self.summarizer_max_tokens:
            raise ValueError(
                f"summarizer_max_tokens ({summarizer_max_tokens}) must be at least four times "
                f"the instruction's token estimate ({needed // 4})"
            )
        self.retry = RetryPolicy.of(retry)
        if failure_mode not in ("fail_closed", "fail_open"):
            raise ValueError(
                f"failure_mode must be 'fail_closed' or 'fail_open', not {failure_mode!r}"
            )
        self.failure_mode = failure_mode

    def middleware_key(self) -> str:
        return "summarization"

    async def on_compress_context(
        self, agent: AgentView, kwargs: CompressArgs, next_handler: CompressNext
    ) -> None:
        """Summarise the history when a trigger fires, then run the inner compressors.

        Boundary: runs before each reasoning step; replaces `agent.state.context` in place
        in one assignment after the summary is ready, so a failure leaves it untouched.
        Calls the summarising model (not the agent's model chain: other middlewares'
        `on_model_call` does not see these calls). Errors follow `failure_mode`.
        """
        context = agent.state.context
        if self._triggered(context):
            await self._summarise(agent, context)
        await next_handler()

    def _triggered(self, context: Sequence[Message]) -> bool:
        if self.max_messages is not None and len(context) > self.max_messages:
            return True
        return self.max_tokens is not None and estimate_tokens(context) > self.max_tokens

    async def _summarise(self, agent: AgentView, context: list[Message]) -> None:
        head = 0
        while head < len(context) and is_system(context[head]):
            head += 1
        history = context[head:]
        kept = self._kept(history, head)
        kept_at = {id(m) for m in kept}
        gone = [m for m in history if id(m) not in kept_at]
        if not gone or (len(gone) == 1 and _is_summary(gone[0])):
            return  # nothing new to summarise: never summarise a lone summary again
        model = self.model or agent.model
        if model is None:
            raise SummarizationError(
                "SummarizationMiddleware has no model: pass model= (a sidecar has no agent model)"
            )
        before = estimate_tokens(context)
        transcript = "\n\n".join(_render(m) for m in history)
        summary, calls = await self._summary(model, agent.kind, transcript)
        message = make_user_text(agent.kind, SUMMARY_PREFIX + summary, id=uuid.uuid4().hex)
        message.metadata = {SUMMARY_METADATA_KEY: True}
        message.create_time = datetime.now(UTC)
        context[:] = [*context[:head], message, *kept]
        state = self.state(agent)
        state["summaries"] = state.get("summaries", 0) + 1
        agent.emit(
            CustomEvent(
                reply_id=agent.reply_id,
                name=SUMMARY_EVENT,
                value={
                    "summarized_messages": len(history),
                    "kept_messages": len(kept),
                    "model_calls": calls,
                    "tokens_before": before,
                    "tokens_after": estimate_tokens(context),
                },
            )
        )

    def _kept(self, history: Sequence[Message], head: int) -> list[Message]:
        """The newest user turns that fit the budget (and leave room under the triggers)."""
        budget = self.keep_user_tokens
        if self.max_tokens is not None:
            budget = min(budget, self.max_tokens // 2)
        most = len(history)
        if self.max_messages is not None:
            most = max(0, self.max_messages - head - 2)
        kept: list[Message] = []
        used = 0
        for msg in reversed(history):
            if len(kept) >= most:
                break
            if not is_user(msg) or tool_results(msg) or _is_summary(msg):
                continue
            cost = estimate_tokens(msg)
            if used + cost > budget:
                break
            kept.append(msg)
            used += cost
        kept.reverse()
        return kept

    async def _summary(
        self, model: ChatModel, kind: MessageKind, transcript: str
    ) -> tuple[str, int]:
        """Summarise `transcript` in as many calls as the input bound needs."""
        rest = transcript
        summary = ""
        calls = 0
        while rest:
            room = self._room(kind, summary)
            if len(rest) <= room:
                piece, rest = rest, ""
            else:
                cut = rest.rfind("\n\n", 0, room)
                if cut <= room // 2:
                    cut = room
                piece, rest = rest[:cut], rest[cut:].lstrip("\n")
            summary = await self._ask(model, kind, self._prompt(kind, summary, piece))
            calls += 1
        return summary, calls

    def _prompt(self, kind: MessageKind, summary: str, piece: str) -> list[Message]:
        cap = self.summarizer_max_tokens * 2  # characters: half the input bound
        if len(summary) > cap:
            summary = summary[: cap - 1] + "…"
        text = f"{_EARLIER}{summary}{_LATER}{piece}" if summary else f"{_FIRST}{piece}"
        return [make_text(kind, "system", self.instruction), make_user_text(kind, text)]

    def _room(self, kind: MessageKind, summary: str) -> int:
        """Characters of transcript that fit one call beside the instruction and `summary`.

        Each character adds at most a quarter token to the estimate; one more token for
        rounding.
        """
        base = estimate_tokens(self._prompt(kind, summary, ""))
        room = 4 * (self.summarizer_max_tokens - base - 1)
        if room <= 0:
            raise SummarizationError("summarizer_max_tokens leaves no room for the transcript")
        return room

    async def _ask(self, model: ChatModel, kind: MessageKind, messages: list[Message]) -> str:
        try:
            async for attempt in self.retry.retrying(_any_error, "summariser call"):
                with attempt:
                    text = (await answer_text(model, messages, kind)).strip()
                    if not text:
                        raise SummarizationError("the summariser answered with no text")
                    return text
        except Exception as exc:
            raise SummarizationError(
                f"the summariser failed {self.retry.max_attempts} times; last error: {exc}"
            ) from exc
        raise AssertionError("unreachable: tenacity re-raises the last error")


def _any_error(exc: BaseException) -> bool:
    return isinstance(exc, Exception)


def _is_summary(msg: Message) -> bool:
    return bool((msg.metadata or {}).get(SUMMARY_METADATA_KEY))


def _render(msg: Message) -> str:
    """One message as transcript lines, the same way for both kinds."""
    label = "summary" if _is_summary(msg) else msg.role
    lines: list[str] = []
    text = text_of(msg)
    if text:
        lines.append(f"[{label}] {text}")
    lines.extend(f"[{label} called {c.name} (call {c.id})] {c.arguments}" for c in tool_calls(msg))
    for result in tool_results(msg):
        media = sum(1 for o in result.output if o.type != "text")
        extra = f" (+{media} media)" if media else ""
        lines.append(
            f"[result of {result.name} (call {result.call_id}, {result.state}){extra}] "
            f"{result.text}"
        )
    return "\n".join(lines) or f"[{label}] (no text)"
