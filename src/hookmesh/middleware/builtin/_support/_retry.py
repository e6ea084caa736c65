"""Retry policies for the built-ins: exponential backoff with jitter (tenacity), which errors
retry, and priming a model stream so a failure before its first chunk can be retried."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from dataclasses import dataclass, fields
from typing import Any

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from hookmesh.models import ModelChunk, ModelError, ModelResponse, ModelResult

log = logging.getLogger("hookmesh.middleware.retry")

RETRY_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
"""HTTP statuses of a `ModelError` worth another attempt (timeouts, rate limits, overload)."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently to try again.

    The n-th wait is ``min(initial_delay * multiplier**(n-1) + U(0, jitter), max_delay)``
    seconds (tenacity's ``wait_exponential_jitter``); ``initial_delay=0, jitter=0`` retries at
    once.
    """

    max_attempts: int = 3
    """Attempts in all, the first included (>= 1)."""
    initial_delay: float = 0.5
    """Seconds before the second attempt (>= 0)."""
    max_delay: float = 8.0
    """Longest wait between attempts, seconds (>= 0)."""
    multiplier: float = 2.0
    """Growth of the wait per attempt (>= 1)."""
    jitter: float = 0.5
    """Up to this many random seconds added to each wait (>= 0), so clients that failed
    together do not retry together."""

    def __post_init__(self) -> None:
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int):
            raise ValueError(f"max_attempts must be an int, not {self.max_attempts!r}")
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        for name in ("initial_delay", "max_delay", "jitter"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative")
        if self.multiplier < 1:
            raise ValueError("multiplier must be at least 1")

    @classmethod
    def of(cls, value: RetryPolicy | Mapping[str, Any] | None) -> RetryPolicy:
        """A policy from itself, a mapping of its fields (YAML params) or None (defaults)."""
        if value is None:
            return cls()
        if isinstance(value, RetryPolicy):
            return value
        known = {f.name for f in fields(cls)}
        unknown = set(value) - known
        if unknown:
            raise ValueError(
                f"unknown retry setting(s) {', '.join(sorted(unknown))}; "
                f"known: {', '.join(sorted(known))}"
            )
        return cls(**value)

    def retrying(self, retryable: Callable[[BaseException], bool], what: str) -> AsyncRetrying:
        """A tenacity loop (``async for attempt in ...: with attempt: ...``) that retries
        errors `retryable` accepts and re-raises the last one."""

        def note(state: RetryCallState) -> None:
            error = state.outcome.exception() if state.outcome else None
            log.warning(
                "%s failed (attempt %d of %d), retrying: %s",
                what,
                state.attempt_number,
                self.max_attempts,
                error,
            )

        return AsyncRetrying(
            stop=stop_after_attempt(self.max_attempts),
            wait=wait_exponential_jitter(
                multiplier=self.initial_delay,
                max=self.max_delay,
                exp_base=self.multiplier,
                jitter=self.jitter,
            ),
            retry=retry_if_exception(retryable),
            before_sleep=note,
            reraise=True,
        )


def model_error_filter(
    errors: tuple[type[BaseException], ...], statuses: Collection[int] | None
) -> Callable[[BaseException], bool]:
    """Which model-call errors are worth another try: instances of `errors`, and for a
    `ModelError` with an HTTP status, only the `statuses` (None: any status)."""

    def retryable(exc: BaseException) -> bool:
        if not isinstance(exc, errors):
            return False
        if isinstance(exc, ModelError) and exc.status and statuses is not None:
            return exc.status in statuses
        return True

    return retryable


async def prime(result: ModelResult) -> ModelResult:
    """A model result whose first chunk has been read (so a stream failing before it fails
    here, where it can be retried); a full response unchanged."""
    if isinstance(result, ModelResponse):
        return result
    try:
        first = await anext(result)
    except StopAsyncIteration:
        return _chain(None, result)
    return _chain(first, result)


async def _chain(first: ModelChunk | None, rest: AsyncIterator[ModelChunk]) -> AsyncIterator[Any]:
    if first is not None:
        yield first
    async for chunk in rest:
        yield chunk
