"""The retention sweeper: rounds until one deletes less than a batch, the clock it is given,
a failing sweep logged and tried again, nothing at all without a ttl."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta

import pytest

from hookmesh.server import RetentionConfig, Sweeper

NOW = datetime(2030, 1, 1, tzinfo=UTC)


async def test_rounds_run_until_one_deletes_less_than_a_batch() -> None:
    left = [7]
    cutoffs: list[datetime] = []

    async def delete(before: datetime, limit: int) -> int:
        cutoffs.append(before)
        gone = min(limit, left[0])
        left[0] -= gone
        return gone

    sweeper = Sweeper.of("items", delete, RetentionConfig(ttl_seconds=60, batch=3), lambda: NOW)
    assert await sweeper.run_once() == 7
    assert cutoffs == [NOW - timedelta(seconds=60)] * 3  # 3 + 3 + 1


async def test_a_failing_sweep_is_logged_and_the_next_tries_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls = [0]

    async def delete(before: datetime, limit: int) -> int:
        calls[0] += 1
        if calls[0] == 1:
            raise OSError("disk gone")
        return 1

    sweeper = Sweeper.of("items", delete, RetentionConfig(ttl_seconds=1), lambda: NOW)
    with caplog.at_level(logging.WARNING, logger="hookmesh.retention"):
        sweeper.start()
        async with asyncio.timeout(5):
            await sweeper.swept.wait()
    await sweeper.stop()
    assert [r.getMessage() for r in caplog.records] == [
        "retention of items failed (tried again later): disk gone"
    ]
    assert await sweeper.run_once() == 1


async def test_without_a_ttl_nothing_runs() -> None:
    async def delete(before: datetime, limit: int) -> int:
        raise AssertionError("swept without a ttl")

    sweeper = Sweeper.of("items", delete, RetentionConfig())
    sweeper.start()
    assert sweeper.swept.is_set() and await sweeper.run_once() == 0
    await sweeper.stop()
