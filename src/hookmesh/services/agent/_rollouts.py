"""Rollouts of the agent service's chain: connecting a candidate, and what the
AdminService tells and does about them."""

from __future__ import annotations

from contextlib import AsyncExitStack

import grpc
from google.protobuf import duration_pb2

from hookmesh.errors import RequestError, SchemaError
from hookmesh.middleware import Middleware
from hookmesh.remote import ClientTLS, RemoteMiddleware, Rollout, RolloutSettings, ShadowMiddleware
from hookmesh.services.agent._config import (
    LocalRolloutConfig,
    RemoteMiddlewareConfig,
    RolloutConfig,
    secret,
)
from hookmesh.v1 import admin_pb2 as _admin_pb2

_MODES = {"shadow": _admin_pb2.ROLLOUT_MODE_SHADOW, "canary": _admin_pb2.ROLLOUT_MODE_CANARY}
_STATES = {
    "active": _admin_pb2.ROLLOUT_STATE_ACTIVE,
    "promoted": _admin_pb2.ROLLOUT_STATE_PROMOTED,
    "rolled_back": _admin_pb2.ROLLOUT_STATE_ROLLED_BACK,
}


async def connect_remote(
    entry: RemoteMiddlewareConfig,
    target: str,
    tls: ClientTLS | None,
    stack: AsyncExitStack,
    *,
    shadow: bool = False,
) -> RemoteMiddleware:
    """Connect the sidecar at `target` with the entry's failure mode, deadline, credentials
    and breaker: the live middleware and its candidate alike (a promoted shadow serves as
    the entry says). A shadow's start does not wait for its sidecar: one that is down never
    stops the agent, and ShadowMiddleware counts its failures as candidate errors.

    Raises:
        SidecarError: A sidecar that did not describe itself (unless fail_open or shadow).
    """
    remote = await RemoteMiddleware.connect(
        target,
        failure_mode=entry.failure_mode,
        timeout=entry.timeout,
        tls=tls,
        token=secret(entry.token_env),
        breaker=entry.breaker.settings(),
        wait=False if shadow else None,
    )
    stack.push_async_callback(remote.aclose)
    return remote


async def connect_candidate(
    entry: RemoteMiddlewareConfig, tls: ClientTLS | None, stack: AsyncExitStack
) -> RemoteMiddleware:
    """Connect the sidecar of the entry's candidate (`connect_remote`)."""
    assert isinstance(entry.rollout, RolloutConfig)
    shadow = entry.rollout.mode == "shadow"
    return await connect_remote(entry, entry.rollout.target, tls, stack, shadow=shadow)


def make_rollout(
    index: int,
    live: Middleware,
    candidate: Middleware,
    trial: RolloutConfig | LocalRolloutConfig,
    stack: AsyncExitStack,
) -> Rollout:
    """The rollout of `candidate` in place of `live`, the chain's `index`th middleware."""
    settings = RolloutSettings(
        trial.mode, trial.share, trial.max_failed_share, trial.min_replies, trial.sample_size
    )
    rollout = Rollout(index, live, candidate, settings)
    if trial.mode == "shadow":
        wrapped = ShadowMiddleware(live, candidate, rollout.compared)
        stack.push_async_callback(wrapped.aclose)
        rollout.shadow = wrapped
    return rollout


def _duration(seconds: float) -> duration_pb2.Duration:
    out = duration_pb2.Duration()
    out.FromNanoseconds(round(seconds * 1e9))
    return out


def rollout_to_pb(rollout: Rollout, generation: int) -> _admin_pb2.RolloutStatus:
    """What `DescribeRollouts` tells of one rollout."""
    settings = rollout.settings
    out = _admin_pb2.RolloutStatus(
        middleware_key=rollout.key,
        candidate_key=rollout.candidate.middleware_key(),
        generation=generation,
        mode=_MODES[settings.mode],
        state=_STATES[rollout.state],
        state_reason=rollout.reason,
        share=settings.share,
    )
    if settings.mode == "canary":
        out.canary.CopyFrom(
            _admin_pb2.CanaryStatus(
                replies=rollout.canary_replies,
                failed_replies=rollout.canary_failed,
                max_failed_share=settings.max_failed_share or 0.0,
                min_replies=settings.min_replies,
            )
        )
    stats = rollout.stats
    if stats is not None:
        out.shadow.CopyFrom(
            _admin_pb2.ShadowStatus(
                compared_invocations=stats.compared,
                agreed_invocations=stats.agreed,
                candidate_errors=stats.errors,
                disagreements=[
                    _admin_pb2.DisagreementCount(kind=kind, count=count)
                    for kind, count in sorted(stats.by_kind.items())
                ],
                latency_p50=_duration(stats.percentile(0.5)),
                latency_p99=_duration(stats.percentile(0.99)),
                samples=[
                    _admin_pb2.DisagreementSample(
                        hook=d.hook,
                        kind=d.kind,
                        reply_id=d.reply_id,
                        live=d.live,
                        candidate=d.candidate,
                    )
                    for d in stats.samples
                ],
            )
        )
    return out


def find_rollout(rollouts: list[Rollout], key: str) -> Rollout:
    """The rollout of the middleware `key` (may be empty when there is only one).

    Raises:
        RequestError: NOT_FOUND ``ROLLOUT_NOT_FOUND`` (no such rollout); INVALID_ARGUMENT
            ``ROLLOUT_AMBIGUOUS`` with BadRequest (several and no key).
    """
    if not key and len(rollouts) > 1:
        keys = ", ".join(r.key for r in rollouts)
        raise SchemaError.single(
            "middleware_key",
            f"the chain has several rollouts; name one of: {keys}",
            reason="ROLLOUT_AMBIGUOUS",
        )
    for rollout in rollouts:
        if not key or rollout.key == key:
            return rollout
    raise RequestError(
        grpc.StatusCode.NOT_FOUND,
        "ROLLOUT_NOT_FOUND",
        f"no rollout of middleware {key!r} in the running chain"
        if key
        else "the running chain has no rollout",
        metadata={"middlewareKey": key},
    )
