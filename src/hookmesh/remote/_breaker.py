"""A sidecar link's circuit breaker: after consecutive missed deadlines the sidecar is not
asked again for a back-off period (its calls fail at once, and the failure mode decides), a
background probe asks whether it answers again, and the back-off doubles while it does not."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from hookmesh.remote._errors import SidecarError

log = logging.getLogger("hookmesh.remote")


@dataclass(frozen=True)
class BreakerSettings:
    """When a sidecar's circuit opens and how it is probed."""

    misses: int = 3
    """Consecutive missed message deadlines that open the circuit (any answer in between
    resets the count)."""
    backoff: float = 5.0
    """Seconds the circuit stays open before the first probe."""
    max_backoff: float = 60.0
    """The back-off doubles after each failed probe, up to this."""

    def __post_init__(self) -> None:
        """Refuse settings that would never open the circuit or never probe.

        Raises:
            ValueError: Naming the bad setting and the range it must be in.
        """
        if isinstance(self.misses, bool) or not isinstance(self.misses, int) or self.misses < 1:
            raise ValueError(
                f"breaker misses must be an integer of at least 1, not {self.misses!r}"
            )
        for name in ("backoff", "max_backoff"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"breaker {name} must be a number of seconds, not {value!r}")
            if not 0 < value < float("inf"):
                raise ValueError(f"breaker {name} must be a positive, finite number of seconds")
        if self.max_backoff < self.backoff:
            raise ValueError(
                f"breaker max_backoff ({self.max_backoff:g} s) must be at least its backoff "
                f"({self.backoff:g} s)"
            )


class CircuitBreaker:
    """Closed: calls go to the sidecar and missed deadlines are counted. Open: `check`
    refuses every call with ``SIDECAR_CIRCUIT_OPEN`` (a ``fail_open`` middleware is skipped,
    a ``fail_closed`` one ends its reply) while `probe` runs after each back-off; the first
    probe that returns closes the circuit.

    Args:
        target: The sidecar's address (in messages).
        probe: One bounded call that raises unless the sidecar answered.
        settings: Thresholds and back-off.
        changed: Called with True when the circuit opens, False when it closes.
    """

    def __init__(
        self,
        target: str,
        probe: Callable[[], Awaitable[object]],
        settings: BreakerSettings,
        changed: Callable[[bool], None],
    ) -> None:
        self._target = target
        self._probe = probe
        self._settings = settings
        self._changed = changed
        self._misses = 0
        self._backoff = settings.backoff
        self._probing: asyncio.Task[None] | None = None

    @property
    def open(self) -> bool:
        """Whether calls are refused now."""
        return self._probing is not None

    def check(self) -> None:
        """Refuse a call while the circuit is open.

        Raises:
            SidecarError: ``SIDECAR_CIRCUIT_OPEN``; nothing was sent.
        """
        if self._probing is not None:
            raise self.refusal()

    def refusal(self) -> SidecarError:
        """The error of a call refused by the open circuit. It counts as reported: the
        circuit's opening warned once for the whole open period."""
        error = SidecarError(
            f"the sidecar missed {self._settings.misses} deadlines in a row: "
            "not called while it is probed",
            reason="SIDECAR_CIRCUIT_OPEN",
            metadata={"misses": str(self._settings.misses)},
        )
        error.reported = True
        return error

    def heard(self) -> None:
        """The sidecar answered: the count of misses starts over."""
        self._misses = 0

    def missed(self) -> bool:
        """A message deadline passed. Returns whether this miss opened the circuit."""
        if self._probing is not None:
            return False
        self._misses += 1
        if self._misses < self._settings.misses:
            return False
        log.warning(
            "sidecar %s missed %d deadlines in a row: its circuit is open, its calls fail at "
            "once (a fail_open middleware is skipped) until a probe after %g s finds it "
            "answering",
            self._target,
            self._misses,
            self._backoff,
        )
        self._probing = asyncio.get_running_loop().create_task(self._probe_until_back())
        self._changed(True)
        return True

    async def _probe_until_back(self) -> None:
        while True:
            await asyncio.sleep(self._backoff)  # the back-off itself, not a synchronisation
            try:
                await self._probe()
            except Exception as exc:
                self._backoff = min(self._backoff * 2, self._settings.max_backoff)
                log.info("sidecar %s still does not answer (%s)", self._target, exc)
                continue
            break
        log.info("sidecar %s answers again: its circuit is closed", self._target)
        self._misses = 0
        self._backoff = self._settings.backoff
        self._probing = None
        self._changed(False)

    async def aclose(self) -> None:
        """Stop probing (the link is closing)."""
        task, self._probing = self._probing, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            self._changed(False)
