"""The conformance runner fails a broken sidecar on the rule it breaks, and on no other: each
broken sidecar in tests/broken_conformance.py breaks one rule, served in process on
loopback (the CLI path is in test_conformance.py)."""

from __future__ import annotations

import pytest

from hookmesh.conformance import run_conformance
from hookmesh.middleware import Middleware
from hookmesh.remote import serve_middleware
from tests import broken_conformance as broken

pytestmark = pytest.mark.timeout(120)


async def _failures(middleware: Middleware) -> dict[str, str]:
    """Rule name → why, for every rule the sidecar serving `middleware` fails."""
    running = await serve_middleware(middleware)
    try:
        results = await run_conformance(f"127.0.0.1:{running.port}", timeout=2.0)
    finally:
        await running.stop(None)
    return {r.name: r.detail for r in results if not r.passed}


async def test_a_sidecar_that_drops_events_fails_the_pass_through_rule() -> None:
    failed = await _failures(broken.DropsEvents())
    assert sorted(failed) == [
        "on_reasoning.pass_through[agentic]",
        "on_reasoning.pass_through[flat]",
    ]
    assert failed["on_reasoning.pass_through[flat]"] == "verdict drop=True, expected False"
