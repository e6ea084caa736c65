"""`hookmesh sidecar` tells a middleware's author what its subscriptions cost."""

from __future__ import annotations

from hookmesh.remote import cost_lines
from tests import middlewares as mws
from tests import remote_middlewares as rmws


def test_the_default_every_item_subscription_shows_its_round_trip_per_event() -> None:
    lines = cost_lines(mws.Tagger("x").describe())
    assert lines[0] == (
        "on_reasoning: intercept, verdicts on *, read-only none: "
        "2 round trips per reasoning step + 1 per item (every event)"
    )
    assert "read_only_subscriptions" in lines[-1]


def test_a_read_only_watcher_costs_no_round_trip_per_item() -> None:
    assert cost_lines(rmws.Watcher().describe()) == [
        "on_reply: intercept, verdicts on none, read-only *: 2 round trips per reply"
    ]
