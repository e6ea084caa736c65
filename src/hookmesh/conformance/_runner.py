"""Run every conformance rule against a sidecar and report one line per rule."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import grpc

from hookmesh.conformance._rules import KIND_RULES, Target
from hookmesh.conformance._session import RuleFailure
from hookmesh.conformance._stream_rules import STREAM_RULES, token_required
from hookmesh.schema import MessageKind
from hookmesh.v1 import middleware_pb2_grpc as pb_grpc

KINDS: tuple[MessageKind, ...] = ("flat", "agentic")


@dataclass(frozen=True)
class RuleResult:
    """One rule's outcome."""

    name: str
    """``<hook>.<rule>[<kind>]`` or ``stream.<rule>``."""
    passed: bool
    detail: str = ""
    """Why it failed."""
    seconds: float = 0.0


async def run_conformance(
    target: str,
    *,
    token: str | None = None,
    timeout: float = 5.0,
    report: Callable[[RuleResult], None] | None = None,
) -> list[RuleResult]:
    """Check the sidecar at `target` (``host:port`` or ``unix:///path``) against every rule.

    Args:
        target: The sidecar serving the conformance middleware.
        token: Bearer token the sidecar requires (a secret: never printed).
        timeout: Seconds to wait for each expected message.
        report: Called with each result as it is known.
    """
    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    results: list[RuleResult] = []
    async with grpc.aio.insecure_channel(target) as channel:
        t = Target(pb_grpc.MiddlewareServiceStub(channel), metadata, timeout, bool(token))
        rules: list[tuple[str, Awaitable[None]]] = []
        for name, stream_rule in STREAM_RULES.items():
            rules.append((name, stream_rule(t)))
        for name, rule in KIND_RULES.items():
            rules.extend((f"{name}[{kind}]", rule(t, kind)) for kind in KINDS)
        if token:
            rules.append(("token_required", token_required(t)))
        for name, run in rules:
            began = time.perf_counter()
            try:
                await run
                result = RuleResult(name, True, seconds=time.perf_counter() - began)
            except RuleFailure as exc:
                result = RuleResult(name, False, str(exc), time.perf_counter() - began)
            except grpc.aio.AioRpcError as exc:
                detail = f"call failed: {exc.code().name}: {exc.details()}"
                result = RuleResult(name, False, detail, time.perf_counter() - began)
            results.append(result)
            if report is not None:
                report(result)
    return results
