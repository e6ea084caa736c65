"""Retries: a failed model call or tool run is tried again, with exponential backoff and
jitter, for the errors that are worth it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Mapping
from typing import TYPE_CHECKING, Any

from hookmesh.middleware import ActingArgs, ActingNext, AgentView, ModelCallArgs, ModelCallNext
from hookmesh.middleware._base import EventHandler, Middleware
from hookmesh.middleware.builtin._support._retry import (
    RETRY_STATUSES,
    RetryPolicy,
    model_error_filter,
    prime,
)
from hookmesh.models import ModelError, ModelResult
from hookmesh.schema import AgentEvent

if TYPE_CHECKING:
    pass


class ModelRetryMiddleware(Middleware):
    """Tries a failed model call again, with exponential backoff and jitter.

    An error is retried when it is one of `errors` and, for a `ModelError` carrying an HTTP
    status, that status is in `statuses` (rate limits, timeouts, overload by default: a 400
    is not retried). Errors without a status (the server unreachable, a model timeout) are.
    A streamed call is retried when it fails before its first chunk; once a chunk went
    upstream the error goes up too. The last error is re-raised after `policy.max_attempts`.

    State: none (the attempts live in the hook's frame). Remote: a sidecar answers an error
    outcome with another ``call_next`` (the protocol's retry).

    Example:
        >>> mw = ModelRetryMiddleware({"max_attempts": 4, "initial_delay": 1.0})
        >>> mw.policy.max_attempts
        4

    Args:
        policy: Attempts and backoff (a `RetryPolicy` or a mapping of its fields).
        errors: Exception classes worth another attempt.
        statuses: HTTP statuses of a `ModelError` worth another attempt; None: any.
    """

    def __init__(
        self,
        policy: RetryPolicy | Mapping[str, Any] | None = None,
        errors: tuple[type[BaseException], ...] = (ModelError,),
        statuses: Collection[int] | None = RETRY_STATUSES,
    ) -> None:
        self.policy = RetryPolicy.of(policy)
        self._retryable = model_error_filter(errors, statuses)

    def middleware_key(self) -> str:
        return "model_retry"

    async def on_model_call(
        self, agent: AgentView, kwargs: ModelCallArgs, next_handler: ModelCallNext
    ) -> ModelResult:
        """Call the downstream until it answers or the policy gives up.

        Wraps the model call (and the inner model-call middlewares, which see each attempt).
        The last error is re-raised: it ends the reply unless an outer middleware handles it.
        """
        async for attempt in self.policy.retrying(self._retryable, "model call"):
            with attempt:
                return await prime(await next_handler())
        raise AssertionError("unreachable: tenacity re-raises the last error")


class _FailedRun(Exception):
    """One tool attempt that ended with an error result; holds its events."""

    def __init__(self, events: list[AgentEvent]) -> None:
        super().__init__("the tool answered with an error")
        self.events = events


class ToolRetryMiddleware(Middleware):
    """Runs a tool again when its run ends in an error result — only if repeating it is safe.

    A call is retried only when its tool is ``read_only`` or ``idempotent``, or named in
    `safe_tools`: a tool that sends an e-mail or charges a card is never repeated unless
    someone said it may be. A retried call's events are held until its attempt ends, so the
    client sees one clean result (the successful one, or the last failure), never a mix;
    other calls stream as usual. An attempt fails when its result's state is ``error`` (the
    agent turns a tool's exception into such a result) and, when `error_types` is set, the
    error names one of those exception types (``Error: TimeoutError: ...``).

    State: none. Remote: the invocation carries the tool's flags (``ActingArgs.tool``), and
    the sidecar answers the post phase with another ``call_next`` to run the tool again.

    Example:
        >>> mw = ToolRetryMiddleware({"max_attempts": 2}, safe_tools=["charge_card_dry_run"])
        >>> sorted(mw.safe_tools)
        ['charge_card_dry_run']

    Args:
        policy: Attempts and backoff (a `RetryPolicy` or a mapping of its fields).
        safe_tools: Names of tools that may be repeated although not marked idempotent.
        error_types: Retry only errors of these exception type names; None: every error.
    """

    subscriptions: Mapping[str, tuple[str, ...]] = {"on_acting": ("*",)}

    def __init__(
        self,
        policy: RetryPolicy | Mapping[str, Any] | None = None,
        safe_tools: Collection[str] = (),
        error_types: Collection[str] | None = None,
    ) -> None:
        self.policy = RetryPolicy.of(policy)
        self.safe_tools = frozenset(safe_tools)
        self._prefixes = (
            None if error_types is None else tuple(f"Error: {name}:" for name in error_types)
        )

    def middleware_key(self) -> str:
        return "tool_retry"

    def _may_repeat(self, kwargs: ActingArgs) -> bool:
        tool = kwargs["tool"]
        if tool.read_only or tool.idempotent:
            return True
        return bool(kwargs["tool_call"].name in self.safe_tools)

    def on_acting(
        self, agent: AgentView, kwargs: ActingArgs, next_handler: ActingNext
    ) -> AsyncIterator[AgentEvent]:
        """Run the tool; rerun it while the result is a retryable error and it is safe.

        Wraps one tool's execution (after the permission check; the context write comes
        after). A call that may not be repeated passes straight through.
        """
        if not self._may_repeat(kwargs):
            return next_handler()
        return self._attempts(kwargs["tool_call"].name, next_handler)

    async def _attempts(self, name: str, next_handler: EventHandler) -> AsyncIterator[AgentEvent]:
        try:
            async for attempt in self.policy.retrying(
                lambda exc: isinstance(exc, _FailedRun), f"tool {name}"
            ):
                with attempt:
                    events = [event async for event in next_handler()]
                    if self._failed(events):
                        raise _FailedRun(events)
        except _FailedRun as last:
            events = last.events
        for event in events:
            yield event

    def _failed(self, events: list[AgentEvent]) -> bool:
        end = next((e for e in reversed(events) if e.type == "tool_result_end"), None)
        if end is None or end.state != "error":
            return False
        if self._prefixes is None:
            return True
        text = "".join(e.text for e in events if e.type == "tool_result_delta")
        return text.startswith(self._prefixes)
