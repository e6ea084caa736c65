"""Run every conformance rule against a sidecar and report one line per rule."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import grpc

from hookmesh.conformance._generic import Generic
from hookmesh.conformance._observe import observing, observing_rules
from hookmesh.conformance._rules import KIND_RULES, STOPPING_HOOKS, Target
from hookmesh.conformance._session import RuleFailure
from hookmesh.conformance._stream_rules import STREAM_RULES, token_required
from hookmesh.schema import MessageKind
from hookmesh.v1 import middleware_pb2 as pb
from hookmesh.v1 import middleware_pb2_grpc as pb_grpc

KINDS: tuple[MessageKind, ...] = ("flat", "agentic")
_OBSERVED_TOO = ("transform_system_prompt", "after_agent", "call_tool")
"""The stream rules the observing variant runs too: its unary hooks and tool intercept."""
DOC = "docs/remote-protocol.md"

_SECTIONS: tuple[tuple[str, str], ...] = (
    ("stream.nothing_after_done", "`done` and its result"),
    *((f"{hook}.stop", "`done` and its result") for hook in STOPPING_HOOKS),
    ("stream.", "The Intercept stream"),
    ("generic.stream.", "The Intercept stream"),
    ("generic.describe", "What Describe declares"),
    ("generic.unary", "Unary RPCs"),
    ("generic.call_tool", "Tools (CallTool)"),
    ("generic.", "Message sequences"),
    ("observe.describe", "Conformance"),
    ("observe.", "Any onion hook, HOOK_MODE_OBSERVE"),
    ("describe", "Conformance"),
    ("on_model_call.stream", "on_model_call, HOOK_MODE_INTERCEPT"),
    ("transform_system_prompt", "Unary RPCs"),
    ("after_agent", "Unary RPCs"),
    ("call_tool", "Tools (CallTool)"),
    ("token_required", "Connecting"),
    ("", "Conformance"),
)
"""Rule name prefix → the section of docs/remote-protocol.md stating the rule (first match)."""


def section(rule: str) -> str:
    """Where the rule is written: ``docs/remote-protocol.md § <section>``."""
    return next(f"{DOC} § {title}" for prefix, title in _SECTIONS if rule.startswith(prefix))


class SetupError(Exception):
    """The kit cannot check the sidecar at all (unreachable, a token needed); one line."""


@dataclass(frozen=True)
class RuleResult:
    """One rule's outcome."""

    name: str
    """``<hook>.<rule>[<kind>]``, ``stream.<rule>`` or ``generic.<rule>``."""
    passed: bool
    detail: str = ""
    """Why it failed, ending with the doc section that states the rule."""
    seconds: float = 0.0


async def _described(t: Target, target: str) -> pb.DescribeResponse:
    try:
        return await t.stub.Describe(  # type: ignore[no-any-return]
            pb.DescribeRequest(protocol_version=1), timeout=t.timeout, metadata=t.metadata
        )
    except grpc.aio.AioRpcError as exc:
        code = exc.code()
        if code == grpc.StatusCode.UNAUTHENTICATED:
            if t.token_required:
                raise SetupError("the sidecar refused the token (UNAUTHENTICATED)") from None
            raise SetupError("the sidecar requires a token: pass --token-env") from None
        if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            raise SetupError(f"cannot reach the sidecar at {target} ({code.name})") from None
        raise SetupError(f"Describe failed: {code.name}: {exc.details()}") from None


async def run_conformance(
    target: str,
    *,
    token: str | None = None,
    timeout: float = 5.0,
    generic: bool = False,
    report: Callable[[RuleResult], None] | None = None,
) -> list[RuleResult]:
    """Check the sidecar at `target` (``host:port`` or ``unix:///path``) against every rule.

    Args:
        target: The sidecar serving the conformance middleware (any sidecar with `generic`);
            when it describes every onion hook observing, the observe-mode rules run.
        token: Bearer token the sidecar requires (a secret: never printed).
        timeout: Seconds to wait for each expected message.
        generic: Check only the rules every middleware obeys, from its own Describe.
        report: Called with each result as it is known.

    Raises:
        SetupError: Describe failed: the sidecar is unreachable or needs a token.
    """
    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    results: list[RuleResult] = []
    async with grpc.aio.insecure_channel(target) as channel:
        t = Target(pb_grpc.MiddlewareServiceStub(channel), metadata, timeout, bool(token))
        described = await _described(t, target)
        rules: list[tuple[str, Callable[[], Awaitable[None]]]] = []
        if generic:
            rules.extend(Generic(t, described).rules())
        elif observing(described):
            rules.extend((name, _bound(rule, t)) for name, rule in observing_rules(KINDS))
            for name in _OBSERVED_TOO:
                rules.append((name, _bound(STREAM_RULES[name], t)))
        else:
            for name, stream_rule in STREAM_RULES.items():
                rules.append((name, _bound(stream_rule, t)))
            for name, rule in KIND_RULES.items():
                rules.extend((f"{name}[{kind}]", _bound(rule, t, kind)) for kind in KINDS)
        if token:
            rules.append(("token_required", _bound(token_required, t)))
        for name, run in rules:
            result = await _run(name, run)
            results.append(result)
            if report is not None:
                report(result)
    return results


def _bound(rule: Callable[..., Awaitable[None]], *args: object) -> Callable[[], Awaitable[None]]:
    return lambda: rule(*args)


async def _run(name: str, run: Callable[[], Awaitable[None]]) -> RuleResult:
    began = time.perf_counter()
    try:
        await run()
    except RuleFailure as exc:
        detail = str(exc)
    except grpc.aio.AioRpcError as exc:
        detail = f"call failed: {exc.code().name}: {exc.details()}"
    except Exception as exc:  # a kit line, never a traceback
        detail = f"the rule could not run: {type(exc).__name__}: {exc}"
    else:
        return RuleResult(name, True, seconds=time.perf_counter() - began)
    return RuleResult(name, False, f"{detail} ({section(name)})", time.perf_counter() - began)
