"""The circuit breaker alone, with a probe the test answers: when it opens, what it refuses,
how the back-off grows and resets, and when it closes. (Against a real hung sidecar:
tests/integration/test_remote_breaker.py.)"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from hookmesh.remote import BreakerSettings, SidecarError
from hookmesh.remote._breaker import CircuitBreaker

pytestmark = pytest.mark.timeout(30)

QUICK = 0.001
"""A back-off in seconds short enough that the probes come at once."""


class Probe:
    """A probe whose answers the test scripts: each call waits for the next one, records the
    back-off it came after, and fails unless the answer says the sidecar is back."""

    def __init__(self) -> None:
        self.answers: asyncio.Queue[bool] = asyncio.Queue()
        self.calls = 0
        self.called = asyncio.Event()

    async def __call__(self) -> None:
        self.calls += 1
        self.called.set()
        if not await self.answers.get():
            raise ConnectionError("still hung")


class Changes(list[bool]):
    """The circuit's reported changes (True: opened), with an event per change."""

    def __init__(self) -> None:
        super().__init__()
        self.changed = asyncio.Event()

    def __call__(self, opened: bool) -> None:
        self.append(opened)
        self.changed.set()


def _breaker(probe: Probe, changes: Changes, **settings: float) -> CircuitBreaker:
    values = {"misses": 3, "backoff": QUICK, "max_backoff": QUICK, **settings}
    return CircuitBreaker("127.0.0.1:9", probe, BreakerSettings(**values), changes)  # type: ignore[arg-type]


async def _wait(event: asyncio.Event) -> None:
    async with asyncio.timeout(10):
        await event.wait()
    event.clear()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"misses": 0}, "misses must be an integer of at least 1"),
        ({"misses": 1.5}, "misses must be an integer"),
        ({"backoff": 0}, "backoff must be a positive, finite number"),
        ({"backoff": -1}, "backoff must be a positive, finite number"),
        ({"max_backoff": "60"}, "max_backoff must be a number of seconds"),
        ({"backoff": True}, "backoff must be a number of seconds"),
        ({"misses": True}, "misses must be an integer"),
        ({"max_backoff": float("inf")}, "max_backoff must be a positive, finite number"),
        ({"backoff": float("nan")}, "backoff must be a positive, finite number"),
        ({"backoff": 10, "max_backoff": 2}, r"max_backoff \(2 s\) must be at least its backoff"),
    ],
)
def test_breaker_settings_refuse_values_that_never_open_or_never_probe(
    settings: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        BreakerSettings(**settings)


def test_the_default_thresholds() -> None:
    assert BreakerSettings() == BreakerSettings(misses=3, backoff=5.0, max_backoff=60.0)


async def test_it_opens_on_exactly_the_configured_consecutive_miss() -> None:
    changes = Changes()
    probe = Probe()
    breaker = _breaker(probe, changes, misses=3)
    assert [breaker.missed(), breaker.missed()] == [False, False]
    assert not breaker.open and changes == []
    breaker.check()  # closed: passes
    assert breaker.missed() is True
    assert breaker.open and changes == [True]
    # Further misses while open neither reopen nor report again.
    assert breaker.missed() is False and changes == [True]
    with pytest.raises(SidecarError) as refused:
        breaker.check()
    error = refused.value
    assert error.reason == "SIDECAR_CIRCUIT_OPEN"
    assert error.metadata == {"misses": "3"}
    assert "missed 3 deadlines in a row" in error.message
    assert error.reported
    await breaker.aclose()
    assert not breaker.open and changes == [True, False]


async def test_an_answer_resets_the_count() -> None:
    changes = Changes()
    breaker = _breaker(Probe(), changes, misses=2)
    for _ in range(4):
        assert breaker.missed() is False
        breaker.heard()
    assert changes == [] and not breaker.open
    await breaker.aclose()
    assert changes == []  # closing a closed breaker reports nothing


async def test_one_miss_opens_with_misses_one(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "hookmesh.remote")
    changes = Changes()
    breaker = _breaker(Probe(), changes, misses=1, backoff=7, max_backoff=7)
    assert breaker.missed() is True
    [warning] = caplog.records
    assert warning.levelno == logging.WARNING
    assert "127.0.0.1:9 missed 1 deadlines in a row" in warning.getMessage()
    assert "after 7 s" in warning.getMessage()
    await breaker.aclose()


async def test_the_first_probe_that_answers_closes_it_and_the_count_starts_over() -> None:
    changes = Changes()
    probe = Probe()
    breaker = _breaker(probe, changes, misses=2)
    breaker.missed()
    breaker.missed()
    for _ in range(2):
        await _wait(probe.called)
        assert breaker.open
        probe.answers.put_nowait(False)
    await _wait(probe.called)
    changes.changed.clear()
    probe.answers.put_nowait(True)
    await _wait(changes.changed)
    assert not breaker.open and changes == [True, False] and probe.calls == 3
    breaker.check()
    # Closed again, it needs the full count of new misses to reopen.
    assert breaker.missed() is False
    assert breaker.missed() is True
    await breaker.aclose()


async def test_the_back_off_doubles_up_to_its_maximum_and_resets_on_close() -> None:
    slept: list[float] = []
    real_sleep = asyncio.sleep

    async def recorded(delay: float) -> None:
        slept.append(delay)
        await real_sleep(0)

    changes = Changes()
    probe = Probe()
    breaker = _breaker(probe, changes, misses=1, backoff=1, max_backoff=5)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("hookmesh.remote._breaker.asyncio.sleep", recorded)
        breaker.missed()
        for _ in range(4):
            await _wait(probe.called)
            probe.answers.put_nowait(False)
        await _wait(probe.called)
        changes.changed.clear()
        probe.answers.put_nowait(True)
        await _wait(changes.changed)
        assert changes == [True, False]
        assert slept == [1, 2, 4, 5, 5]
        breaker.missed()
        await _wait(probe.called)
        assert slept[-1] == 1  # a new open period starts from the first back-off
        await breaker.aclose()


async def test_closing_stops_the_probe() -> None:
    changes = Changes()
    probe = Probe()
    breaker = _breaker(probe, changes, misses=1)
    breaker.missed()
    await _wait(probe.called)
    await breaker.aclose()
    assert not breaker.open and changes == [True, False]
    await breaker.aclose()
    assert changes == [True, False]  # once only
