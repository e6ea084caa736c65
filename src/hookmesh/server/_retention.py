"""Retention of a store: a sweep deleting what is older than configured, once at start and
then periodically, in bounded batches (docs/security.md, "Data lifecycle")."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

from pydantic import BaseModel, ConfigDict, Field

log = logging.getLogger("hookmesh.retention")

Clock = Callable[[], datetime]
"""The current time (UTC, aware); tests pass their own."""
Sweep = Callable[[datetime, int], Awaitable[int]]
"""Given the current time and a count, delete at most that many expired items; how many."""


def utc_now() -> datetime:
    """The real clock."""
    return datetime.now(UTC)


class RetentionConfig(BaseModel):
    """How long a store keeps what it holds (the same keys on every service that has one)."""

    model_config = ConfigDict(extra="forbid")

    ttl_seconds: float | None = Field(None, gt=0)
    """Delete items not written for this long; unset keeps them forever."""
    sweep_interval_seconds: float = Field(3600.0, gt=0)
    """Seconds between sweeps (the first runs at start)."""
    batch: int = Field(500, ge=1, le=100_000)
    """Most items one round deletes (a round is one bounded unit of work; a sweep runs
    rounds until one deletes fewer)."""


def older_than(ttl_seconds: float, delete: Callable[[datetime, int], Awaitable[int]]) -> Sweep:
    """The sweep of a store whose `delete(before, limit)` removes items last written before
    a time: what is older than `ttl_seconds` at each sweep."""

    async def sweep(now: datetime, limit: int) -> int:
        return await delete(now - timedelta(seconds=ttl_seconds), limit)

    return sweep


class Sweeper:
    """Runs `sweep` in rounds of at most `batch`: `start` begins at once and repeats every
    `interval` seconds.

    Args:
        name: What is swept, for the log (``retrieval.documents``).
        sweep: The bounded delete; None: nothing ever runs (no retention configured).
        interval: Seconds between sweeps.
        batch: Most items one round deletes.
        clock: The current time.
    """

    def __init__(
        self,
        name: str,
        sweep: Sweep | None,
        *,
        interval: float,
        batch: int = 500,
        clock: Clock = utc_now,
    ) -> None:
        self.name = name
        self._sweep = sweep
        self.interval = interval
        self.batch = batch
        self.clock = clock
        self.swept = asyncio.Event()
        """Set after the first sweep (at start) finished, deleted or failed."""
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def of(
        cls,
        name: str,
        delete: Callable[[datetime, int], Awaitable[int]],
        config: RetentionConfig,
        clock: Clock = utc_now,
    ) -> Sweeper:
        """The sweeper of a store under `config` (`delete(before, limit)`, `older_than`)."""
        ttl = config.ttl_seconds
        sweep = older_than(ttl, delete) if ttl is not None else None
        return cls(name, sweep, interval=config.sweep_interval_seconds, batch=config.batch,
                   clock=clock)  # fmt: skip

    async def run_once(self) -> int:
        """One sweep: rounds of at most `batch` until a round deletes fewer; how many went.
        A failure is logged and ends the sweep; the next tries again."""
        if self._sweep is None:
            return 0
        now = self.clock()
        gone = 0
        try:
            while True:
                deleted = await self._sweep(now, self.batch)
                gone += deleted
                if deleted < self.batch:
                    break
        except Exception as exc:
            log.warning("retention of %s failed (tried again later): %s", self.name, exc)
        if gone:
            log.info("retention deleted %d of %s", gone, self.name)
        return gone

    def start(self) -> None:
        """Sweep now, then every `sweep_interval_seconds`, in the background."""
        if self._sweep is None:
            self.swept.set()
            return
        self._task = asyncio.create_task(self._run(), name=f"retention {self.name}")

    async def _run(self) -> None:
        try:
            await self.run_once()
        finally:
            self.swept.set()
        while True:
            await asyncio.sleep(self.interval)
            await self.run_once()

    async def stop(self) -> None:
        """Cancel the background sweeps."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
