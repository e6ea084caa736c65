"""The conformance middleware observing: every onion hook in HOOK_MODE_OBSERVE, so the
marker that would make it emit, mutate, override, drop, fail or end early must make it send
nothing (the conformance middleware has no hook to spare for observe mode, so the references
serve this variant too: `ObservingConformanceMiddleware`, `conformance.js --observe`, the Go
example's `--observe`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from hookmesh.conformance._rules import (
    _END,
    ACTING,
    COMPRESS,
    MODEL,
    PERMISSION,
    REASONING,
    REPLY,
    SHORT_SILENCE,
    EventHook,
    Target,
    _item,
    _req,
    _result,
)
from hookmesh.conformance._session import check, invocation
from hookmesh.conformance._stream_rules import _EXPECTED_HOOKS, hook_name
from hookmesh.schema import MessageKind
from hookmesh.v1 import middleware_pb2 as pb

MARKERS = (
    "",
    "emit",
    "state",
    "forget",
    "short-circuit",
    "override",
    "model",
    "drop",
    "final",
    "final-verdict",
    "error",
    "error-after",
    "retry",
    "stop",
)
"""Every marker but `sleep`: each would make an intercepting hook send something."""
ONION = (REPLY, REASONING, MODEL, ACTING, PERMISSION, COMPRESS)
_OBSERVED = "observe mode: the sidecar sends nothing back, no emit, mutate or done"


def _outcome(h: EventHook, kind: MessageKind) -> pb.DownstreamOutcome:
    if h in (MODEL, PERMISSION):
        return _result(h.name, kind)
    return _END


def observing(d: pb.DescribeResponse) -> bool:
    """Whether `d` describes the conformance middleware with every onion hook observing."""
    onion = [h for h in d.hooks if h.hook in {o.hook for o in ONION}]
    return (
        d.middleware_key == "conformance"
        and len(onion) == len(ONION)
        and all(h.mode == pb.HOOK_MODE_OBSERVE for h in onion)
    )


def mismatches(d: pb.DescribeResponse) -> list[str]:
    """How the description differs from the observing conformance middleware's."""
    out: list[str] = []
    described = {h.hook: h for h in d.hooks}
    for hook, (_, subs, read_only) in _EXPECTED_HOOKS.items():
        h = described.get(hook)
        name = hook_name(hook)
        if h is None:
            out.append(f"{name}: missing")
            continue
        if hook in {o.hook for o in ONION} and h.mode != pb.HOOK_MODE_OBSERVE:
            out.append(f"{name}: mode {pb.HookMode.Name(h.mode)}, expected HOOK_MODE_OBSERVE")
        if hook == pb.HOOK_ON_COMPRESS_CONTEXT:
            continue  # pre_only ignored its subscriptions; observing, none are expected
        if sorted(h.subscriptions) != subs or sorted(h.read_only_subscriptions) != read_only:
            out.append(f"{name}: subscriptions changed from the conformance middleware's")
    return out


async def describe(t: Target) -> None:
    d = await t.stub.Describe(
        pb.DescribeRequest(protocol_version=1), timeout=t.timeout, metadata=t.metadata
    )
    check(d.needs_context, "needs_context not set")
    found = mismatches(d)
    check(not found, "; ".join(found))


async def observed(t: Target, kind: MessageKind, h: EventHook) -> None:
    """One invocation per marker on one stream, each with its items and outcome: silence."""
    session = t.session()
    try:
        for word in MARKERS:
            iid = word or "none"
            await session.send(invocation(iid, h.hook, kind, word, **h.args))
            for make in h.items:
                await session.send(_req(iid, item=_item(make())))
            await session.send(_req(iid, outcome=_outcome(h, kind)))
        await session.silence(SHORT_SILENCE, _OBSERVED)
    finally:
        session.cancel()


ObserveRule = Callable[[Target], Awaitable[None]]


def observing_rules(kinds: tuple[MessageKind, ...]) -> list[tuple[str, ObserveRule]]:
    """Rule name → rule, for the observing variant (the unary and tool rules run as well)."""
    out: list[tuple[str, ObserveRule]] = [("observe.describe", describe)]
    for h in ONION:
        for kind in kinds:
            out.append((f"observe.{h.name}[{kind}]", _bind(h, kind)))
    return out


def _bind(h: EventHook, kind: MessageKind) -> ObserveRule:
    return lambda t: observed(t, kind, h)
