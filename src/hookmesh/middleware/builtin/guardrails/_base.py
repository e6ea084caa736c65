"""The guardrail family: one middleware class whose checks run on the user's input, the final
answer, a tool call's arguments or its result, and stop the reply when they trip."""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Collection, Iterable, Mapping
from types import MappingProxyType
from typing import Any, Literal, NamedTuple

from hookmesh.middleware import (
    ActingArgs,
    ActingNext,
    AgentView,
    FailureMode,
    GuardrailStage,
    GuardrailTripped,
    Middleware,
    ReplyArgs,
    ReplyNext,
)
from hookmesh.middleware.builtin.guardrails._parallel import alongside
from hookmesh.schema import AgentEvent, Message, is_user, text_of

GuardrailMode = Literal["blocking", "parallel"]
"""``blocking``: the check ends before what it checks goes on. ``parallel`` (input only):
the check runs alongside the first model call, which it cancels when it trips."""

Verdict = str | None
"""What a check found: why it trips, or None when the subject passes."""

_STAGES = ("input", "output", "tool_arguments", "tool_result")
_HOOKS: dict[str, tuple[GuardrailStage, ...]] = {
    "on_reply": ("input",),
    "after_agent": ("output",),
    "on_acting": ("tool_arguments", "tool_result"),
}
_NO_ITEMS: tuple[str, ...] = ()
_NO_ARGUMENTS: Mapping[str, Any] = MappingProxyType({})


class GuardrailSubject(NamedTuple):
    """What one check looks at (a tuple: made once per check, on the reply's path)."""

    stage: GuardrailStage
    """Which stage."""
    text: str
    """The text: the user's input, the final answer (the JSON of a structured one), a
    call's arguments as JSON, or a tool's result text."""
    tool: str = ""
    """The tool, for the tool stages."""
    arguments: Mapping[str, Any] = _NO_ARGUMENTS
    """The parsed arguments, for ``tool_arguments``."""


class Guardrail(Middleware):
    """Base of every guardrail: override `check`; the hooks are this class's.

    A check returns why the subject trips (a short text that reaches the client) or None;
    it may be a plain function (cheapest: a passing blocking input check then costs the
    reply nothing per event) or a coroutine. A trip ends the reply with reason
    ``GUARDRAIL_TRIPPED`` naming the guardrail, whatever the failure mode; a check that
    fails (raises) follows the failure mode: ``fail_closed`` ends the reply with the error,
    ``fail_open`` skips the guardrail. What a trip keeps out of the session:
    docs/middleware/guardrails.md.

    Only the hooks of the configured stages are implemented (decided per instance, so a
    sidecar describes exactly those). State: a parallel input check's subject while it
    runs, in ``middle_context``, so a reply continued elsewhere checks it again first.

    Args:
        stages: What to check (`GuardrailStage`).
        mode: ``blocking`` or ``parallel`` (the input stage only; the others block).
        name: The guardrail's name, in the trip's error and its middleware key
            (``guardrail.<name>``).
        tools: For the tool stages: only calls of these tools (all when None).
        failure_mode: What a failing check does.

    Example:
        >>> PatternGuardrail(deny=[r"\\bpassword\\b"], stages=("input", "tool_arguments"))
    """

    default_name = "guardrail"
    """The name when none is given."""

    def __init__(
        self,
        *,
        stages: Iterable[GuardrailStage] = ("input",),
        mode: GuardrailMode = "blocking",
        name: str = "",
        tools: Collection[str] | None = None,
        failure_mode: FailureMode = "fail_closed",
    ) -> None:
        self.stages = frozenset(stages)
        unknown = self.stages - set(_STAGES)
        if unknown or not self.stages:
            raise ValueError(f"stages must be some of {', '.join(_STAGES)}, not {sorted(unknown)}")
        if mode not in ("blocking", "parallel"):
            raise ValueError(f"mode must be 'blocking' or 'parallel', not {mode!r}")
        self.mode: GuardrailMode = mode
        self.name = name or self.default_name
        self.tools = frozenset(tools) if tools is not None else None
        self.failure_mode = failure_mode
        self._hooks = frozenset(h for h, on in _HOOKS.items() if self.stages & set(on))
        # NOTE(guardrails): a sidecar sees only what a check needs: nothing of a blocking
        # input check's reply (one round trip), the ends a parallel one holds, the result
        # pieces of a result check.
        subscriptions: dict[str, tuple[str, ...]] = {"on_reply": _NO_ITEMS, "on_acting": _NO_ITEMS}
        if mode == "parallel":
            subscriptions["on_reply"] = ("model_call_end", "reply_end")
        if "tool_result" in self.stages:
            subscriptions["on_acting"] = ("tool_result_delta", "tool_result_end")
        self.subscriptions = subscriptions

    def middleware_key(self) -> str:
        return f"guardrail.{self.name}"

    def implements(self, hook: str) -> bool:
        return hook in self._hooks

    def check(self, agent: AgentView, subject: GuardrailSubject) -> Verdict | Awaitable[Verdict]:
        """Why `subject` trips, or None when it passes; a plain function or a coroutine.

        Raises:
            Exception: The check itself failed (the failure mode decides).
        """
        raise NotImplementedError(f"{type(self).__name__} must implement check")

    def trip(self, stage: GuardrailStage, why: str, **metadata: str) -> GuardrailTripped:
        """The trip of this guardrail at `stage`."""
        return GuardrailTripped(self.name, stage, why, metadata)

    async def _verdict(self, agent: AgentView, subject: GuardrailSubject) -> Verdict:
        verdict = self.check(agent, subject)
        return await verdict if inspect.isawaitable(verdict) else verdict

    # --- input -------------------------------------------------------------------------------

    def on_reply(
        self, agent: AgentView, kwargs: ReplyArgs, next_handler: ReplyNext
    ) -> AsyncIterator[AgentEvent]:
        """The input stage: blocking, the check ends before the core sees the input (a trip:
        it is never saved or sent); parallel, it runs alongside the first model call."""
        inputs = kwargs["inputs"]
        if not inputs:
            pending = self.state(agent).get("input") if kwargs["resume"] is not None else None
            if pending is not None:  # a parallel check cut off with its reply: check first
                subject = GuardrailSubject("input", pending["text"])
                return self._blocking(agent, subject, next_handler, pending["inputId"])
            return next_handler()
        subject = GuardrailSubject("input", _input_text(inputs))
        verdict = self.check(agent, subject)
        # NOTE(guardrails): a check that is a plain function has decided already, before any
        # model call could start: it runs blocking in either mode, at no cost per event.
        if verdict is None:
            return next_handler()
        first = inputs[0].id
        if isinstance(verdict, str):
            raise self.trip("input", verdict, inputId=first)
        if self.mode == "parallel":
            state = self.state(agent)
            state["input"] = {"text": subject.text, "inputId": first}
            trip = functools.partial(self.trip, "input", inputId=first)
            return alongside(self, verdict, trip, state, next_handler())
        return self._after(verdict, next_handler, first)

    async def _blocking(
        self, agent: AgentView, subject: GuardrailSubject, next_handler: ReplyNext, first: str
    ) -> AsyncIterator[AgentEvent]:
        verdict = await self._verdict(agent, subject)
        if verdict is not None:
            raise self.trip("input", verdict, inputId=first)
        self.state(agent).pop("input", None)
        async for event in next_handler():
            yield event

    async def _after(
        self, verdict: Awaitable[Verdict], next_handler: ReplyNext, first: str
    ) -> AsyncIterator[AgentEvent]:
        found = await verdict
        if found is not None:
            raise self.trip("input", found, inputId=first)
        async for event in next_handler():
            yield event

    # --- output ------------------------------------------------------------------------------

    async def after_agent(self, agent: AgentView, final: Message) -> None:
        """The output stage: the final answer (a structured one as its JSON) before reply_end
        says it is final; a trip takes it out of the context."""
        output = agent.output
        text = json.dumps(output.as_json(), ensure_ascii=False) if output else text_of(final)
        verdict = await self._verdict(agent, GuardrailSubject("output", text))
        if verdict is not None:
            raise self.trip("output", verdict)

    # --- tools -------------------------------------------------------------------------------

    def on_acting(
        self, agent: AgentView, kwargs: ActingArgs, next_handler: ActingNext
    ) -> AsyncIterator[AgentEvent]:
        """The tool stages: a call's arguments before it runs (a trip: it never runs), its
        result before the model sees it (a trip: the model never does)."""
        call = kwargs["tool_call"]
        if self.tools is not None and call.name not in self.tools:
            return next_handler()
        verdict: Verdict | Awaitable[Verdict] = None
        if "tool_arguments" in self.stages:
            arguments = kwargs["arguments"]
            text = json.dumps(arguments, ensure_ascii=False, sort_keys=True)
            subject = GuardrailSubject("tool_arguments", text, call.name, arguments)
            verdict = self.check(agent, subject)
        if "tool_result" in self.stages or inspect.isawaitable(verdict):
            return self._tool_run(agent, call.name, verdict, next_handler)
        if verdict is not None:
            raise self.trip("tool_arguments", verdict, tool=call.name)
        return next_handler()

    async def _tool_run(
        self,
        agent: AgentView,
        tool: str,
        verdict: Verdict | Awaitable[Verdict],
        next_handler: ActingNext,
    ) -> AsyncIterator[AgentEvent]:
        found = await verdict if inspect.isawaitable(verdict) else verdict
        if found is not None:
            raise self.trip("tool_arguments", found, tool=tool)
        if "tool_result" not in self.stages:
            async for event in next_handler():
                yield event
            return
        held: list[AgentEvent] = []
        async for event in next_handler():
            if event.source_path or event.type not in ("tool_result_delta", "tool_result_end"):
                yield event
                continue
            held.append(event)
            if event.type == "tool_result_end":
                text = "".join(e.text for e in held if e.type == "tool_result_delta")
                subject = GuardrailSubject("tool_result", text, tool)
                found = await self._verdict(agent, subject)
                if found is not None:
                    raise self.trip("tool_result", found, tool=tool)
                for ready in held:
                    yield ready
                held = []


def _input_text(inputs: list[Message]) -> str:
    """The text a user gave: every user message's text (a tool result is not text)."""
    if len(inputs) == 1:  # the common case, once per reply: no generator, no join
        return text_of(inputs[0]) if is_user(inputs[0]) else ""
    return "\n".join(text_of(m) for m in inputs if is_user(m))
