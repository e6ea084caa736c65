"""The conformance kit against broken sidecars: each broken middleware of
tests/broken_conformance.py, served in process on loopback, breaks one rule, and that rule
fails saying how (the CLI path is in test_conformance.py).

The reference passes every rule here too, so a rule that fails a broken sidecar fails it for
the break, not for being wrong itself."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest

from hookmesh.conformance import ConformanceMiddleware, run_conformance
from hookmesh.conformance._rules import KIND_RULES, Target
from hookmesh.conformance._session import RuleFailure
from hookmesh.conformance._stream_rules import STREAM_RULES, token_required
from hookmesh.middleware import Middleware
from hookmesh.remote import serve_middleware
from hookmesh.schema import MessageKind
from hookmesh.v1 import middleware_pb2_grpc as pb_grpc
from tests import broken_conformance as broken

pytestmark = pytest.mark.timeout(120)

_TIMEOUT = 2.0
"""Seconds a rule waits for each expected message (the broken ones time out on purpose)."""


async def _failures(middleware: Middleware) -> dict[str, str]:
    """Rule name → why, for every rule the sidecar serving `middleware` fails."""
    running = await serve_middleware(middleware)
    try:
        results = await run_conformance(f"127.0.0.1:{running.port}", timeout=_TIMEOUT)
    finally:
        await running.stop(None)
    return {r.name: r.detail for r in results if not r.passed}


async def test_the_reference_passes_every_rule_in_process() -> None:
    assert await _failures(ConformanceMiddleware()) == {}


async def test_a_sidecar_that_drops_events_fails_the_pass_through_rule() -> None:
    failed = await _failures(broken.DropsEvents())
    assert sorted(failed) == [
        "on_reasoning.pass_through[agentic]",
        "on_reasoning.pass_through[flat]",
    ]
    assert failed["on_reasoning.pass_through[flat]"] == "verdict drop=True, expected False"


@pytest.fixture
async def target() -> AsyncIterator[object]:
    """Serves a middleware in process; yields a function from it to the runner's target."""
    servers: list[object] = []
    channels: list[grpc.aio.Channel] = []

    async def serve(middleware: Middleware, token: str | None = None) -> Target:
        running = await serve_middleware(middleware, token=token)
        servers.append(running)
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.port}")
        channels.append(channel)
        metadata = (("authorization", f"Bearer {token}"),) if token else ()
        return Target(pb_grpc.MiddlewareServiceStub(channel), metadata, _TIMEOUT, bool(token))

    try:
        yield serve
    finally:
        for channel in channels:
            await channel.close()
        for running in servers:
            await running.stop(None)  # type: ignore[attr-defined]


KIND_CASES: list[tuple[type[Middleware], str, str]] = [
    (broken.EmitsUnasked, "on_reasoning.pass_through", "emitted without a marker"),
    (broken.OverridesUnasked, "on_reasoning.pass_through", "call_next carries overrides"),
    (broken.NeverCallsNext, "on_reasoning.pass_through", "answered the invocation with done"),
    (broken.IgnoresShortCircuit, "on_reasoning.short_circuit", "did not short-circuit"),
    (broken.ShortCircuitsSilently, "on_reasoning.short_circuit", "emitted []"),
    (broken.IgnoresOverride, "on_reasoning.override", "no reasoning overrides"),
    (broken.OverridesWrongly, "on_reasoning.override", "tool_choice not overridden to none"),
    (broken.IgnoresEmit, "on_reasoning.emit", "before call_next: emitted []"),
    (broken.EmitsOnlyBefore, "on_reasoning.emit", "before done: emitted []"),
    (broken.IgnoresDrop, "on_reasoning.drop", "verdict drop=False, expected True"),
    (broken.ForgetsState, "on_reasoning.state", "no mutate with the state"),
    (broken.LosesState, "on_reasoning.state", "expected count 5, kept kept"),
    (broken.IgnoresFinal, "on_reasoning.final", "call_next.final not set"),
    (broken.FailsWithAnotherReason, "on_reasoning.error", "reason 'OTHER'"),
    (broken.FailsWithoutTheHook, "on_reasoning.error", "metadata {'errorType'"),
    (broken.IgnoresErrorAfter, "on_reasoning.error_after", "done carries no error"),
    (broken.IgnoresReplyEmit, "on_reply.read_only", "emitted []"),
    (broken.OverridesActingWrongly, "on_acting.override", "arguments {'text': 'other'}"),
    (broken.ChangesTheModelResponse, "on_model_call.full", "done changed the model_response"),
    (broken.ShortCircuitsWithTheWrongKind, "on_model_call.short_circuit", "response is "),
    (broken.PicksAnotherModel, "on_model_call.model", "model 'slow'"),
    (broken.AllowsTheShortCircuit, "on_check_permission.short_circuit", "not denied"),
    (broken.DeniesWithAnotherReason, "on_check_permission.short_circuit", "reason 'no'"),
    (broken.ChangesTheDecision, "on_check_permission.pass_through", "done changed the permission"),
    (broken.IgnoresCompressEmit, "on_compress_context.pre_only", "emitted []"),
    (broken.ForgetsTheWrongMessage, "context.forget", "expected [m1]"),
]


@pytest.mark.parametrize("kind", ["flat", "agentic"])
@pytest.mark.parametrize(
    ("middleware", "rule", "why"), KIND_CASES, ids=[c[0].__name__ for c in KIND_CASES]
)
async def test_a_broken_sidecar_fails_the_rule_it_breaks(
    target: object, middleware: type[Middleware], rule: str, why: str, kind: MessageKind
) -> None:
    t = await target(middleware())  # type: ignore[operator]
    with pytest.raises(RuleFailure) as failure:
        await KIND_RULES[rule](t, kind)
    assert why in str(failure.value)


STREAM_CASES: list[tuple[type[Middleware], str, str]] = [
    (broken.WrongKey, "describe", "middleware_key 'not-conformance'"),
    (broken.NoContext, "describe", "needs_context not set"),
    (broken.NoTools, "describe", "tool conformance_echo missing"),
    (broken.KeepsThePrompt, "transform_system_prompt", "prompt 'base'"),
    (broken.CountsInThePrompt, "transform_system_prompt", "changed the state"),
    (broken.ForgetsAfterAgent, "after_agent", "state None"),
]


@pytest.mark.parametrize(
    ("middleware", "rule", "why"), STREAM_CASES, ids=[c[0].__name__ for c in STREAM_CASES]
)
async def test_a_broken_sidecar_fails_the_stream_rule_it_breaks(
    target: object, middleware: type[Middleware], rule: str, why: str
) -> None:
    t = await target(middleware())  # type: ignore[operator]
    with pytest.raises(RuleFailure) as failure:
        await STREAM_RULES[rule](t)
    assert why in str(failure.value)


async def test_a_sidecar_without_a_token_fails_the_token_rule(target: object) -> None:
    """The runner was given a token, but the sidecar answers without one."""
    open_one = await target(ConformanceMiddleware())  # type: ignore[operator]
    t = Target(open_one.stub, (("authorization", "Bearer s3cret"),), _TIMEOUT, True)
    with pytest.raises(RuleFailure, match="a call without the bearer token succeeded"):
        await token_required(t)
    secured = await target(ConformanceMiddleware(), token="s3cret")  # type: ignore[operator]
    await token_required(secured)
