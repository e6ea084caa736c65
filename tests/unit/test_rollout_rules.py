"""Rollout rules without a network: the share by session hash over 500 sessions, the
canary's automatic rollback only past its minimum and limit, promote and rollback, the
AdminService's choice of rollout by key, and the metrics both modes record."""

from __future__ import annotations

import hashlib
from typing import Any

import grpc
import pytest

from hookmesh.cli._rollout import _line
from hookmesh.cli._sidecar_status import all_serving, sidecar_line
from hookmesh.errors import RequestError, SchemaError
from hookmesh.remote import (
    Disagreement,
    Rollout,
    RolloutSettings,
    ShadowMiddleware,
    session_bucket,
)
from hookmesh.services.agent._config import RolloutConfig
from hookmesh.services.agent._rollouts import find_rollout, rollout_to_pb
from hookmesh.v1 import admin_pb2 as _admin_pb2
from tests.rollout_middlewares import V1, V2


def _rollout(**settings: object) -> Rollout:
    values: dict[str, object] = {"mode": "canary", "share": 0.3, **settings}
    return Rollout(0, V1(), V2(), RolloutSettings(**values))  # type: ignore[arg-type]


def test_the_bucket_is_the_documented_hash_of_the_session_id() -> None:
    digest = hashlib.sha256(b"session-7").digest()
    assert session_bucket("session-7") == int.from_bytes(digest[:8], "big") % 10_000


def test_a_canary_share_picks_its_fraction_of_500_sessions_and_each_one_always() -> None:
    rollout = _rollout(share=0.3)
    sessions = [f"{i:08x}-session" for i in range(500)]
    chosen = [s for s in sessions if isinstance(rollout.choose(s), V2)]
    assert 0.25 * 500 <= len(chosen) <= 0.35 * 500
    assert all(isinstance(rollout.choose(s), V2) for s in chosen)  # sticky
    assert _rollout(share=0.0).choose(sessions[0]).__class__ is V1
    assert all(isinstance(_rollout(share=1.0).choose(s), V2) for s in sessions)


def test_a_canary_rolls_back_only_once_it_served_its_minimum_and_passed_its_limit() -> None:
    rollout = _rollout(share=1.0, max_failed_share=0.25, min_replies=4)
    for failed in (True, True, True):  # 3 of 3 failed, but fewer than 4 replies
        rollout.landed("s", failed)
    assert rollout.state == "active"
    rollout.landed("s", False)  # 3 of 4: 75% > 25%
    assert rollout.state == "rolled_back"
    assert rollout.reason == "automatic: 3 of 4 canary replies failed, over the 25% allowed"
    assert isinstance(rollout.choose("s"), V1)
    rollout.landed("s", True)  # no longer counted
    assert (rollout.canary_replies, rollout.canary_failed) == (4, 3)


def test_a_canary_at_its_limit_stays_and_sessions_outside_the_share_do_not_count() -> None:
    rollout = _rollout(share=1.0, max_failed_share=0.5, min_replies=2)
    rollout.landed("a", True)
    rollout.landed("b", False)  # 50% is not over 50%
    assert rollout.state == "active"
    outside = _rollout(share=0.0, max_failed_share=0.1, min_replies=1)
    outside.landed("a", True)
    assert (outside.canary_replies, outside.state) == (0, "active")


def test_promote_and_rollback_choose_for_every_session_and_the_last_call_wins() -> None:
    rollout = _rollout(share=0.0)
    rollout.promote("ops")
    assert isinstance(rollout.choose("any"), V2) and rollout.reason == "promoted by ops"
    rollout.rollback("ops")
    assert isinstance(rollout.choose("any"), V1) and rollout.reason == "rolled back by ops"
    rollout.promote("ops")
    assert rollout.state == "promoted"


def test_a_rollout_is_found_by_key_or_alone() -> None:
    one, two = _rollout(), Rollout(1, V2(), V1(), RolloutSettings("canary", 0.1))
    assert find_rollout([one], "") is one
    assert find_rollout([one], "versioned") is one
    with pytest.raises(SchemaError) as ambiguous:
        find_rollout([one, two], "")
    assert ambiguous.value.reason == "ROLLOUT_AMBIGUOUS"
    assert ambiguous.value.violations[0].field == "middleware_key"
    with pytest.raises(RequestError) as missing:
        find_rollout([one], "other")
    assert (missing.value.code, missing.value.reason) == (
        grpc.StatusCode.NOT_FOUND,
        "ROLLOUT_NOT_FOUND",
    )


class _Metered(V1):
    def middleware_key(self) -> str:
        return "metered-rollout"


def _points(reader: Any, name: str) -> dict[tuple[tuple[str, Any], ...], Any]:
    found = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name != name:
                    continue
                for point in metric.data.data_points:
                    if point.attributes.get("hookmesh.middleware") == "metered-rollout":
                        key = tuple(sorted(point.attributes.items()))
                        found[key] = point
    return found


def test_shadow_comparisons_and_canary_replies_are_metrics(metric_reader: Any) -> None:
    shadow = Rollout(0, _Metered(), V2(), RolloutSettings("shadow", 1.0))
    shadow.compared(0.002, None, False)
    shadow.compared(0.004, Disagreement("on_reasoning", "events", "r", "[]", "[]"), False)
    shadow.compared(0.004, Disagreement("on_reasoning", "events", "r", "[]", "[]"), False)
    shadow.compared(0.003, Disagreement("on_reasoning", "error", "r", "", "boom"), True)
    canary = Rollout(0, _Metered(), V2(), RolloutSettings("canary", 1.0))
    canary.landed("s", False)
    canary.landed("s", True)
    counts = {
        dict(k)["hookmesh.rollout.outcome"]: p.value
        for k, p in _points(metric_reader, "hookmesh.rollout.shadow.comparisons").items()
    }
    assert counts == {"agree": 1, "events": 2, "error": 1}
    durations = _points(metric_reader, "hookmesh.rollout.shadow.duration")
    assert sorted((dict(k).get("error.type", ""), p.count) for k, p in durations.items()) == [
        ("", 3),
        ("candidate", 1),
    ]
    replies = _points(metric_reader, "hookmesh.rollout.canary.replies")
    assert {dict(k)["hookmesh.rollout.failed"]: p.value for k, p in replies.items()} == {
        "false": 1,
        "true": 1,
    }
    stats = shadow.stats
    assert stats is not None and stats.by_kind == {"events": 2, "error": 1}
    assert (stats.compared, stats.agreed, stats.errors) == (4, 1, 1)
    assert [d.kind for d in stats.samples] == ["events", "events", "error"]
    shadow.landed("s", True)  # a shadow serves no reply: nothing to count
    assert (shadow.canary_replies, shadow.state) == (0, "active")


def test_shadow_latency_quantiles_are_over_the_recorded_invocations() -> None:
    stats = Rollout(0, V1(), V2(), RolloutSettings("shadow", 1.0)).stats
    assert stats is not None and stats.percentile(0.5) == 0.0  # none yet
    for ms in range(100, 0, -1):
        stats.latencies.append(ms / 1000)
    assert (stats.percentile(0.5), stats.percentile(0.99), stats.percentile(1.0)) == (
        0.051,
        0.1,
        0.1,
    )
    assert stats.percentile(0.0) == 0.001


def test_a_canary_is_judged_after_every_reply_past_its_minimum() -> None:
    rollout = _rollout(share=1.0, max_failed_share=0.5, min_replies=2)
    for failed in (False, False, True, True):  # 2 of 4: not over 50%
        rollout.landed("s", failed)
    assert rollout.state == "active"
    rollout.landed("s", True)  # 3 of 5
    assert rollout.state == "rolled_back"


def test_the_share_is_a_bucket_below_its_cutoff() -> None:
    session = "session-at-the-edge"
    bucket = session_bucket(session)
    at = _rollout(share=bucket / 10_000)  # the cutoff is the session's own bucket
    above = _rollout(share=(bucket + 1) / 10_000)
    assert (at.in_share(session), above.in_share(session)) == (False, True)


def test_shadow_latencies_are_the_last_1000() -> None:
    stats = Rollout(0, V1(), V2(), RolloutSettings("shadow", 1.0)).stats
    assert stats is not None
    stats.latencies.append(5.0)
    stats.latencies.extend([0.001] * 999)
    assert stats.percentile(1.0) == 5.0  # still one of the last 1000
    stats.latencies.append(0.001)
    assert stats.percentile(1.0) == 0.001


def test_a_promoted_or_rolled_back_canary_counts_no_more_replies() -> None:
    for settle in ("promote", "rollback"):
        rollout = _rollout(share=1.0, max_failed_share=0.1, min_replies=1)
        getattr(rollout, settle)("ops")
        rollout.landed("s", True)
        assert (rollout.canary_replies, rollout.canary_failed) == (0, 0)
        assert rollout.state == ("promoted" if settle == "promote" else "rolled_back")


def test_a_shadow_rollout_gives_its_share_the_shadowed_live_middleware() -> None:
    live, candidate = V1(), V2()
    rollout = Rollout(0, live, candidate, RolloutSettings("shadow", 1.0))
    rollout.shadow = ShadowMiddleware(live, candidate, rollout.compared)
    assert rollout.choose("any") is rollout.shadow
    assert Rollout(0, live, candidate, RolloutSettings("shadow", 0.0)).choose("any") is live


def test_the_settings_defaults_are_the_configs() -> None:
    config = RolloutConfig(mode="canary", target="127.0.0.1:1")
    settings = RolloutSettings("canary", config.share)
    assert (settings.max_failed_share, settings.min_replies, settings.sample_size) == (
        config.max_failed_share,
        config.min_replies,
        config.sample_size,
    )


def test_a_canary_status_carries_canary_figures_and_a_shadow_shadow_ones() -> None:
    canary, shadow = _rollout(), Rollout(0, V1(), V2(), RolloutSettings("shadow", 1.0))
    assert canary.stats is None
    assert rollout_to_pb(canary, 3).WhichOneof("figures") == "canary"
    status = rollout_to_pb(shadow, 3)
    assert (status.WhichOneof("figures"), status.generation) == ("shadow", 3)


def test_status_judges_only_live_sidecars_and_names_roles_it_does_not_know() -> None:
    live = _admin_pb2.SIDECAR_ROLE_LIVE
    candidate = _admin_pb2.SIDECAR_ROLE_CANDIDATE
    status = _admin_pb2.SidecarStatus
    down_candidate = status(middleware_key="g", target="t", role=candidate, serving=False)
    assert all_serving([status(role=live, serving=True), down_candidate])
    assert not all_serving([status(role=live, serving=False), down_candidate])
    assert " candidate " in sidecar_line(down_candidate)
    assert " live " in sidecar_line(status(role=live, serving=True))
    assert " 9 " in sidecar_line(status(role=9))  # a newer agent's role: its number


def test_a_rollout_line_names_a_mode_or_state_it_does_not_know_by_number() -> None:
    out = _admin_pb2.RolloutStatus(middleware_key="g", candidate_key="g", mode=7, state=8)
    assert _line(out)[0].startswith("g: 7 of g (0% of sessions), 8")
    known = _admin_pb2.RolloutStatus(
        middleware_key="g",
        candidate_key="g",
        mode=_admin_pb2.ROLLOUT_MODE_SHADOW,
        state=_admin_pb2.ROLLOUT_STATE_ROLLED_BACK,
    )
    assert _line(known)[0] == "g: shadow of g (0% of sessions), rolled_back"


class Renamed(V1):
    """A live middleware whose key is learnt late (a sidecar that described itself after
    the chain was built)."""

    key = ""

    def middleware_key(self) -> str:
        return self.key


def test_a_rollouts_key_is_the_live_middlewares_key_now() -> None:
    live = Renamed()
    rollout = Rollout(0, live, V2(), RolloutSettings("canary", 0.1))
    live.key = "guard"
    assert rollout.key == "guard"
    assert find_rollout([rollout, _rollout()], "guard") is rollout
