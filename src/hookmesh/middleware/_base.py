"""The middleware base class: the hooks around the agent's ReAct loop and their boundaries."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from hookmesh.middleware._description import (
    FailureMode,
    HookMode,
    HookSpec,
    MiddlewareDescription,
    default_subscriptions,
)
from hookmesh.middleware._permission import PermissionDecision
from hookmesh.schema import AgentEvent, Message

if TYPE_CHECKING:
    from hookmesh.middleware._kwargs import (
        ActingArgs,
        ActingNext,
        CompressArgs,
        CompressNext,
        ModelCallArgs,
        ModelCallNext,
        PermissionArgs,
        PermissionNext,
        ReasoningArgs,
        ReasoningNext,
        ReplyArgs,
        ReplyNext,
    )
    from hookmesh.middleware._view import AgentView
    from hookmesh.models import ModelResult
    from hookmesh.tools import Tool

EventHandler = Callable[..., AsyncIterator[AgentEvent]]
"""Any event hook's `next_handler` (the typed ones: `ReasoningNext`, `ActingNext`, ...)."""
ModelHandler = Callable[..., Awaitable["ModelResult"]]
"""on_model_call's `next_handler`, untyped (the typed one: `ModelCallNext`)."""
PermissionHandler = Callable[..., Awaitable[PermissionDecision]]
"""on_check_permission's `next_handler`, untyped (the typed one: `PermissionNext`)."""
CompressHandler = Callable[..., Awaitable[None]]
"""on_compress_context's `next_handler`, untyped (the typed one: `CompressNext`)."""

ONION_HOOKS = (
    "on_reply",
    "on_reasoning",
    "on_model_call",
    "on_acting",
    "on_check_permission",
    "on_compress_context",
)
"""Hooks that wrap a step and receive `next_handler`."""
HOOKS = (*ONION_HOOKS, "on_system_prompt", "after_agent")
"""Every hook a middleware may implement."""
EVENT_HOOKS = ("on_reply", "on_reasoning", "on_acting")
"""Hooks that yield events: an async generator, or a plain function returning
``next_handler(...)``."""


class MiddlewareDefinitionError(TypeError):
    """A middleware class defines a hook with the wrong shape (e.g. a sync `on_system_prompt`)."""


_PROBLEMS: dict[type, tuple[str, ...]] = {}


def hook_problems(cls: type[Middleware]) -> tuple[str, ...]:
    """What is wrong with the hooks `cls` defines (empty when nothing is); checked once per
    class, so attaching a middleware costs a dict lookup."""
    known = _PROBLEMS.get(cls)
    if known is not None:
        return known
    problems = []
    for hook in HOOKS:
        method = getattr(cls, hook)
        if method is getattr(Middleware, hook):
            continue
        method = inspect.unwrap(method)
        if hook in EVENT_HOOKS:
            if inspect.iscoroutinefunction(method):
                problems.append(
                    f"{hook} must be an async generator or a plain function returning "
                    "next_handler(...), not 'async def' returning a value"
                )
        elif not inspect.iscoroutinefunction(method) and not (
            hook in ONION_HOOKS and _returns_awaitable(method)
        ):
            shape = (
                "'async def'"
                if hook not in ONION_HOOKS
                else (
                    "'async def' (or a plain function annotated '-> Awaitable[...]' that returns "
                    "next_handler(...))"
                )
            )
            problems.append(f"{hook} must be {shape}")
    _PROBLEMS[cls] = tuple(problems)
    return _PROBLEMS[cls]


def _returns_awaitable(method: Callable[..., Any]) -> bool:
    annotation = inspect.signature(method).return_annotation
    return any(word in str(annotation) for word in ("Awaitable", "Coroutine"))


def check_middleware(mw: Middleware) -> None:
    """Refuse a middleware whose hooks have the wrong shape, naming it and the hook.

    Raises:
        MiddlewareDefinitionError: A hook is sync where it must be async, or the reverse.
    """
    problems = hook_problems(type(mw))
    if problems:
        raise MiddlewareDefinitionError(
            f"middleware {mw.middleware_key()} ({type(mw).__qualname__}): {'; '.join(problems)}"
        )


class Middleware:
    """Base of every middleware. Override only the hooks you need.

    Which hooks a middleware implements is read once, when an agent is built, by comparing
    each method with this class's; the agent builds one pre-bucketed chain per hook. The
    first middleware in the agent's list is the outermost layer of every onion hook.

    Keep no per-reply state on the instance: one instance may serve many agents and
    concurrent replies. Use `state(agent)`, which lives in
    ``agent.state.middle_context[middleware_key()][reply_id]`` and so survives a pause for
    human confirmation and a restart of the process.

    Attributes:
        failure_mode: ``fail_closed`` (default): an error in a hook ends the reply with a
            reply_end error naming this middleware (reason ``MIDDLEWARE_FAILED``, or the
            error's own when it is a HookmeshError). ``fail_open``: the error is logged and
            this middleware is skipped for that hook invocation; the reply goes on.
    """

    failure_mode: FailureMode = "fail_closed"
    needs_context: bool = False
    """Remote only: invocations carry the conversation context (it costs bytes per call)."""
    subscriptions: Mapping[str, tuple[str, ...]] = {}
    """Remote only: per onion hook, the downstream items the sidecar must see: event tags
    (``"reply_end"``), ``"chunk"`` for model streams, or ``"*"`` (the default) for all.
    Narrow it: unsubscribed items pass with no round trip."""
    local_only_reason: str = ""
    """Set for a middleware a sidecar cannot serve (one that must reach into the agent's own
    process): why. `hookmesh sidecar` refuses it with this reason."""
    read_only_subscriptions: Mapping[str, tuple[str, ...]] = {}
    """Remote only: per onion hook, downstream items the sidecar sees as they pass but never
    answers (no round trip; the agent yields them at once). Re-yield such an item unchanged
    before pulling the next one; dropping or changing it has no effect remotely. A hook named
    here subscribes to nothing else unless `subscriptions` names it too."""
    hook_modes: Mapping[str, HookMode] = {}
    """Remote only: per onion hook, ``intercept`` (default), ``pre_only`` (one round trip,
    no post phase) or ``observe`` (send and go; results ignored)."""

    def middleware_key(self) -> str:
        """Key of this middleware's slice of `middle_context`; defaults to the class name."""
        return type(self).__name__

    def list_tools(self) -> list[Tool]:
        """Tools this middleware contributes to every agent it is attached to."""
        return []

    def implements(self, hook: str) -> bool:
        """Whether this middleware overrides `hook`."""
        return getattr(type(self), hook) is not getattr(Middleware, hook)

    def describe(self) -> MiddlewareDescription:
        """This instance's description: its key, failure mode, and per implemented hook its
        mode and subscriptions (from the attributes above, which an instance may set).

        Raises:
            ValueError: A subscription names an item its hook does not have.
        """
        hooks = {
            hook: HookSpec(
                self.hook_modes.get(hook, "intercept"),
                default_subscriptions(hook, self.subscriptions, self.read_only_subscriptions),
                tuple(self.read_only_subscriptions.get(hook, ())),
            )
            for hook in HOOKS
            if self.implements(hook)
        }
        return MiddlewareDescription(
            self.middleware_key(),
            hooks,
            self.failure_mode,
            self.needs_context,
            self.local_only_reason,
            tuple(t.name for t in self.list_tools()),
        )

    def state(self, agent: AgentView) -> dict[str, Any]:
        """This middleware's JSON-serialisable state for the agent's current reply."""
        by_reply = agent.state.middle_context.setdefault(self.middleware_key(), {})
        return by_reply.setdefault(agent.reply_id, {})

    def _not_implemented(self, hook: str) -> RuntimeError:
        return RuntimeError(f"{type(self).__name__} does not implement {hook}")

    def on_reply(
        self, agent: AgentView, kwargs: ReplyArgs, next_handler: ReplyNext
    ) -> AsyncIterator[AgentEvent]:
        """Wrap a whole reply, from reply_start to reply_end.

        kwargs (`ReplyArgs`): ``inputs`` (new messages, or empty on resume) and ``resume``
        (the resume payload, or None; a sidecar gets an empty `Resume`). `next_handler`
        takes no overrides. Everything the reply does runs inside this hook, so it sees every
        event, reply_start and reply_end included. Errors of inner hooks arrive as a
        reply_end error event, not as exceptions. May be an async generator or a plain
        function returning `next_handler()` (zero per-event cost).
        """
        raise self._not_implemented("on_reply")

    def on_reasoning(
        self, agent: AgentView, kwargs: ReasoningArgs, next_handler: ReasoningNext
    ) -> AsyncIterator[AgentEvent]:
        """Wrap one reasoning step: building the prompt, the model call, and its events.

        kwargs (`ReasoningArgs`): ``tool_choice``. Context compression runs before this
        hook; tool execution after it. Override ``tool_choice`` with
        ``next_handler(tool_choice="none")``, the only override it takes.
        """
        raise self._not_implemented("on_reasoning")

    async def on_model_call(
        self, agent: AgentView, kwargs: ModelCallArgs, next_handler: ModelCallNext
    ) -> ModelResult:
        """Wrap one model call; return a `ModelResponse` or an async iterator of chunks.

        kwargs (`ModelCallArgs`): ``model``, ``messages`` (system message first),
        ``tools``, ``tool_choice``; `next_handler` may override any of them (a model only as
        ``agent.resolve_model(name)``). Not calling `next_handler` short-circuits the model.
        A wrapper that needs the end of a stream must wrap the iterator; returning
        `await next_handler()` passes it through untouched.
        """
        raise self._not_implemented("on_model_call")

    def on_acting(
        self, agent: AgentView, kwargs: ActingArgs, next_handler: ActingNext
    ) -> AsyncIterator[AgentEvent]:
        """Wrap one tool's pure execution; yields tool_result_start / delta / end events.

        kwargs (`ActingArgs`): ``tool_call`` (a `ToolCall`), ``tool`` (its `ToolInfo`) and
        ``arguments`` (parsed and validated). `next_handler(arguments=...)` runs the tool
        with other arguments, validated against its schema. Argument parsing, the permission
        check and the context write happen outside this hook: it sees only calls that were
        allowed, and what it yields becomes the result in the context.
        """
        raise self._not_implemented("on_acting")

    async def on_check_permission(
        self, agent: AgentView, kwargs: PermissionArgs, next_handler: PermissionNext
    ) -> PermissionDecision:
        """Decide whether one tool call may run.

        kwargs (`PermissionArgs`): ``tool_call`` and ``tool``; `next_handler` takes no
        overrides. The core asks for confirmation when the tool is marked
        ``needs_confirmation`` and allows it otherwise.
        """
        raise self._not_implemented("on_check_permission")

    async def on_compress_context(
        self, agent: AgentView, kwargs: CompressArgs, next_handler: CompressNext
    ) -> None:
        """Shrink `agent.state.context` before a reasoning step; the core does nothing.

        kwargs (`CompressArgs`): none yet; `next_handler` takes no overrides. Edit the
        context in place (keep the leading system messages).
        """
        raise self._not_implemented("on_compress_context")

    async def on_system_prompt(self, agent: AgentView, prompt: str) -> str:
        """Transform the system prompt; runs in list order before each reasoning step (after
        context compression, outside `on_reasoning`), so what a tool wrote in one step can
        reach the next step's prompt. A fail_closed error ends the reply."""
        raise self._not_implemented("on_system_prompt")

    async def after_agent(self, agent: AgentView, final: Message) -> None:
        """Run after a successful reply (final answer or return-directly tool), in list order.

        Never runs after an error, an interrupt, exceeding max_iters or a pause. The first
        error stops the rest and ends the reply with an error. Context changes are kept.
        """
        raise self._not_implemented("after_agent")
