"""The conformance kit against broken sidecars: each broken middleware of
tests/broken_conformance.py, served in process on loopback, breaks one rule, and that rule
fails saying how (the CLI path is in test_conformance.py).

The reference passes every rule here too, so a rule that fails a broken sidecar fails it for
the break, not for being wrong itself."""

from __future__ import annotations

import grpc
import pytest

from hookmesh.conformance import (
    ConformanceMiddleware,
    ObservingConformanceMiddleware,
    run_conformance,
)
from hookmesh.conformance._rules import KIND_RULES, Target
from hookmesh.conformance._session import RuleFailure
from hookmesh.conformance._stream_rules import STREAM_RULES, token_required
from hookmesh.middleware import Middleware
from hookmesh.remote import SERVICE_NAME, serve_middleware
from hookmesh.schema import MessageKind
from hookmesh.server import Service, start_server
from hookmesh.v1 import middleware_pb2_grpc as pb_grpc
from tests import broken_conformance as broken
from tests.conformance_target import TIMEOUT, target

__all__ = ["target"]  # the served-sidecar fixture, shared by the conformance tests

pytestmark = pytest.mark.timeout(120)


async def _failures(middleware: Middleware) -> dict[str, str]:
    """Rule name → why, for every rule the sidecar serving `middleware` fails."""
    running = await serve_middleware(middleware)
    try:
        results = await run_conformance(f"127.0.0.1:{running.port}", timeout=TIMEOUT)
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
    assert failed["on_reasoning.pass_through[flat]"] == (
        "verdict drop=True, expected False (docs/remote-protocol.md § Conformance)"
    )


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
    (broken.LosesState, "on_reasoning.state", "expected {'count': 5, 'kept': 'yes'}"),
    (broken.IgnoresFinal, "on_reasoning.final", "call_next.final not set"),
    (broken.FailsWithAnotherReason, "on_reasoning.error", "reason 'OTHER'"),
    (broken.FailsWithoutTheHook, "on_reasoning.error", "metadata {'errorType'"),
    (broken.FailsWithAnEarlierReason, "on_reasoning.error", "reason 'CONFORMANCE'"),
    (broken.IgnoresErrorAfter, "on_reasoning.error_after", "done carries no error"),
    (broken.IgnoresRetry, "on_reasoning.retry", "answered the failed outcome with done, no retry"),
    (broken.IgnoresFinalVerdict, "on_reasoning.final_verdict", "verdict.final not set"),
    (broken.IgnoresStop, "on_reasoning.stop", "answered the first item with a verdict, not done"),
    (broken.StopsSilently, "on_reasoning.stop", "before done: emitted []"),
    (broken.StreamsOnDespiteStop, "on_model_call.stop", "expected done"),
    (broken.IgnoresReplyEmit, "on_reply.read_only", "emitted []"),
    (broken.OverridesActingWrongly, "on_acting.override", "arguments {'text': 'other'}"),
    (broken.IgnoresActingFinal, "on_acting.final", "call_next.final not set"),
    (broken.ForgetsReplyState, "on_reply.state", "no mutate with the state"),
    (broken.IgnoresModelToolChoice, "on_model_call.override", "no model_call overrides"),
    (broken.ModelEmitsOnlyBefore, "on_model_call.emit", "before done: emitted []"),
    (
        broken.ModelEmitsAnExtraEventBefore,
        "on_model_call.emit",
        "before call_next: emitted ['conformance.pre', 'conformance.extra']",
    ),
    (
        broken.ModelEmitsAnExtraEventAfter,
        "on_model_call.emit",
        "before done: emitted ['conformance.post', 'conformance.extra']",
    ),
    (broken.ModelIgnoresErrorAfter, "on_model_call.error_after", "done carries no error"),
    (broken.ReplyIgnoresErrorAfter, "on_reply.error_after", "done carries no error"),
    (broken.ModelForgetsState, "on_model_call.state", "no mutate with the state"),
    (broken.ModelIgnoresError, "on_model_call.error", "got call_next, expected done"),
    (broken.ModelFailsWithoutTheHook, "on_model_call.error", "metadata {'errorType'"),
    (broken.PermissionForgetsState, "on_check_permission.state", "no mutate with the state"),
    (
        broken.PermissionCountsFromZero,
        "on_check_permission.state",
        "expected {'count': 1, 'kept': 'yes'}",
    ),
    (broken.PermissionIgnoresEmit, "on_check_permission.emit", "before call_next: emitted []"),
    (broken.PermissionEmitsOnlyBefore, "on_check_permission.emit", "before done: emitted []"),
    (broken.DeniesSilently, "on_check_permission.short_circuit", "emitted []"),
    (broken.EmitChangesTheDecision, "on_check_permission.emit", "done changed the permission"),
    (
        broken.PermissionIgnoresShortCircuit,
        "on_check_permission.short_circuit",
        "did not short-circuit with done",
    ),
    (
        broken.ChangesTheDecisionAfterAMutate,
        "on_check_permission.pass_through",
        "done changed the permission",
    ),
    (
        broken.DeniesWithAnExtraEvent,
        "on_check_permission.short_circuit",
        "emitted ['conformance.short_circuit', 'conformance.extra']",
    ),
    (broken.PermissionFailsWithAnotherReason, "on_check_permission.error", "reason 'OTHER'"),
    (
        broken.PermissionIgnoresErrorAfter,
        "on_check_permission.error_after",
        "done carries no error",
    ),
    (broken.CompressLosesState, "on_compress_context.state", "no mutate with the state"),
    (broken.CompressIgnoresError, "on_compress_context.error", "got call_next, expected done"),
    (broken.ChangesTheModelResponse, "on_model_call.full", "done changed the model_response"),
    (broken.ShortCircuitsWithTheWrongKind, "on_model_call.short_circuit", "response is "),
    (broken.PicksAnotherModel, "on_model_call.model", "model 'slow'"),
    (broken.AllowsTheShortCircuit, "on_check_permission.short_circuit", "not denied"),
    (broken.DeniesWithAnotherReason, "on_check_permission.short_circuit", "reason 'no'"),
    (broken.AsksAtTheShortCircuit, "on_check_permission.short_circuit", "not denied"),
    (broken.DeniesWithALaterReason, "on_check_permission.short_circuit", "reason 'unsafe'"),
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
    t = Target(open_one.stub, (("authorization", "Bearer s3cret"),), TIMEOUT, True)
    with pytest.raises(RuleFailure, match="a call without the bearer token succeeded"):
        await token_required(t)
    secured = await target(ConformanceMiddleware(), token="s3cret")  # type: ignore[operator]
    await token_required(secured)


MIDDLEWARE_STREAM_CASES: list[tuple[type[Middleware], str, str]] = [
    (broken.FailsOpen, "describe", "failure_mode FAILURE_MODE_OPEN, expected FAILURE_MODE_CLOSED"),
    (broken.EchoesHello, "call_tool", "streamed 'hello'"),
]


@pytest.mark.parametrize(
    ("middleware", "rule", "why"),
    MIDDLEWARE_STREAM_CASES,
    ids=[c[0].__name__ for c in MIDDLEWARE_STREAM_CASES],
)
async def test_a_broken_description_or_tool_fails_its_rule(
    target: object, middleware: type[Middleware], rule: str, why: str
) -> None:
    t = await target(middleware())  # type: ignore[operator]
    with pytest.raises(RuleFailure) as failure:
        await STREAM_RULES[rule](t)
    assert why in str(failure.value)


async def test_either_reading_of_count_plus_one_but_the_spec_s_fails(target: object) -> None:
    """A missing count reads as 0, so it becomes 1: a sidecar leaving it 0 fails."""
    t = await target(broken.CountsFromZero())  # type: ignore[operator]
    with pytest.raises(RuleFailure, match=r"expected \{'count': 1, 'kept': 'yes'\}"):
        await KIND_RULES["on_reasoning.state"](t, "flat")


async def test_a_hook_yielding_after_pass_rest_sends_nothing_more(target: object) -> None:
    """The final verdict ended the invocation: what the hook yields later is not sent."""
    t = await target(broken.EmitsAfterPassRest())  # type: ignore[operator]
    await KIND_RULES["on_reasoning.final_verdict"](t, "flat")


async def _servicer_failures(servicer: object, *, generic: bool = False) -> dict[str, str]:
    """Rule name → why, for every rule the sidecar served by `servicer` fails."""
    running = await start_server(
        [Service(SERVICE_NAME, servicer, pb_grpc.add_MiddlewareServiceServicer_to_server)],
        "127.0.0.1:0",
    )
    try:
        results = await run_conformance(
            f"127.0.0.1:{running.port}", timeout=TIMEOUT, generic=generic
        )
    finally:
        await running.stop(None)
    return {r.name: r.detail for r in results if not r.passed}


async def test_the_untampered_host_passes_every_rule() -> None:
    """The base of the message-level breaks below changes nothing by itself."""
    assert await _servicer_failures(broken.Tampered()) == {}


async def test_a_sidecar_that_answers_a_chunk_fails_the_stream_rule() -> None:
    failed = await _servicer_failures(broken.VerdictsForChunks())
    assert sorted(failed) == [
        f"on_model_call.{rule}[{kind}]"
        for rule in ("stop", "stream")
        for kind in ("agentic", "flat")
    ]
    assert failed["on_model_call.stream[flat]"].startswith(
        "expected silence (stream_start and chunks are never answered; for invocation '1'), "
        "got verdict"
    )
    assert failed["on_model_call.stream[flat]"].endswith(
        "(docs/remote-protocol.md § on_model_call, HOOK_MODE_INTERCEPT)"
    )


async def test_a_sidecar_that_doubles_done_fails_nothing_after_done() -> None:
    failed = await _servicer_failures(broken.DoublesDone())
    assert "stream.nothing_after_done" in failed
    assert failed["stream.nothing_after_done"].startswith(
        "sent done for invocation '1' after its done (stream.nothing_after_done"
    )
    assert failed["stream.nothing_after_done"].endswith("§ `done` and its result)")
    # Where another rule sees the second done too, it names the same cause.
    assert all("after its done" in why for why in failed.values())


async def test_a_sidecar_that_emits_for_another_reply_fails_naming_the_reply() -> None:
    failed = await _servicer_failures(broken.EmitsForAnotherReply())
    assert "on_reasoning.emit[flat]" in failed
    assert all("emit for reply 'another-reply'" in why for why in failed.values())


async def test_a_sidecar_that_answers_late_after_cancel_fails_the_cancel_rules() -> None:
    failed = await _servicer_failures(broken.AnswersLateAfterCancel())
    assert sorted(failed) == ["stream.cancel_mid_invocation", "stream.deadline_then_cancel"]
    assert "got done" in failed["stream.cancel_mid_invocation"]


async def test_a_done_right_after_stream_start_passes() -> None:
    """The protocol allows it; the kit must not call it "never answered"."""
    assert await _servicer_failures(broken.DoneAfterStreamStart()) == {}


async def test_one_invocation_map_for_all_streams_fails_ids_restart_per_stream() -> None:
    failed = await _servicer_failures(broken.SharesInvocations())
    assert failed["stream.ids_restart_per_stream"].startswith(
        "the answer to the second stream's invocation 1 came on the first stream"
    )


async def test_a_sidecar_that_never_ends_its_stream_fails_without_a_traceback() -> None:
    failed = await _servicer_failures(broken.NeverEndsTheStream())
    assert sorted(failed) == ["stream.clean_close_cancels_open", "stream.ids_restart_per_stream"]
    assert failed["stream.clean_close_cancels_open"].startswith(
        "the sidecar did not end the stream within 2 s of the agent closing its side"
    )


async def test_bad_tool_arguments_answered_with_an_error_result_fail_call_tool() -> None:
    failed = await _servicer_failures(broken.LenientArguments())
    assert list(failed) == ["call_tool"]
    assert failed["call_tool"].startswith(
        "arguments 'not json' were not refused with INVALID_ARGUMENT"
    )


async def test_a_final_verdict_where_the_outcome_is_needed_fails_pass_through() -> None:
    """verdict.final ends an invocation: allowed by the protocol (the generic rules pass it),
    wrong where the conformance middleware needs the outcome."""
    failed = await _servicer_failures(broken.FinalVerdicts())
    assert "on_reasoning.pass_through[flat]" in failed
    assert failed["on_reasoning.pass_through[flat]"].startswith(
        "verdict.final set by a hook that needs the outcome"
    )
    assert await _servicer_failures(broken.FinalVerdicts(), generic=True) == {}


async def test_a_done_after_a_final_call_next_fails_the_final_rules() -> None:
    """The final call_next and the final verdict alike."""
    failed = await _servicer_failures(broken.DoneAfterFinal())
    assert sorted(failed) == [
        f"on_{hook}.{rule}[{kind}]"
        for hook in ("acting", "reasoning")
        for rule in ("final", "final_verdict")
        for kind in ("agentic", "flat")
    ]
    assert failed["on_acting.final[flat]"].startswith(
        "sent done for invocation '1' after its final call_next (stream.nothing_after_done"
    )
    assert failed["on_acting.final_verdict[flat]"].startswith(
        "sent done for invocation '1' after its final verdict (stream.nothing_after_done"
    )


async def test_a_done_for_an_invocation_never_sent_fails_naming_it() -> None:
    failed = await _servicer_failures(broken.AnswersUnstarted())
    assert "stream.nothing_after_done" in failed
    assert all(
        why.startswith(
            "sent done for invocation 'never-sent', which the agent never started on this stream"
        )
        for why in failed.values()
    )


async def test_answering_after_an_unasked_done_fails_the_stop_rules() -> None:
    """After its own done the sidecar ignores what the agent had sent meanwhile."""
    failed = await _servicer_failures(broken.AnswersAfterItsDone())
    assert sorted(failed) == [
        f"on_{hook}.stop[{kind}]"
        for hook in ("acting", "model_call", "reasoning", "reply")
        for kind in ("agentic", "flat")
    ]
    assert failed["on_reply.stop[flat]"].startswith(
        "sent done for invocation '1' after its done (stream.nothing_after_done"
    )


GENERIC_CASES: list[tuple[type[broken.Tampered], str, str]] = [
    (broken.Tampered, "", ""),
    (broken.DoublesDone, "generic.on_reasoning.answers", "after its done"),
    (broken.AnswersLateAfterCancel, "generic.stream.cancel", "got done"),
    (broken.NeverEndsTheStream, "generic.stream.clean_close", "did not end the stream"),
    (broken.SharesInvocations, "generic.stream.ids_restart_per_stream", "came on the first"),
    (broken.VerdictsForChunks, "generic.on_model_call.answers", "got verdict"),
    (broken.DoneAfterFinalVerdicts, "generic.on_reasoning.answers", "after its final verdict"),
    (broken.AnswersUnstarted, "generic.on_reasoning.answers", "never started on this stream"),
    (broken.ObservedPlainly, "", ""),
    (broken.DoneAtReadOnlyItems, "", ""),
    (broken.MutatesWhileObserving, "generic.on_reply.answers", "observe mode: the sidecar"),
    (broken.MutatesWhileObserving, "generic.on_model_call.answers", "got mutate"),
    (broken.AnswersObservedOutcomes, "generic.on_reply.answers", "got done"),
]


@pytest.mark.parametrize(
    ("servicer", "rule", "why"), GENERIC_CASES, ids=[c[0].__name__ for c in GENERIC_CASES]
)
async def test_generic_mode_fails_a_broken_sidecar_under_its_rule(
    servicer: type[broken.Tampered], rule: str, why: str
) -> None:
    failed = await _servicer_failures(servicer(), generic=True)
    if not rule:
        assert failed == {}
        return
    assert rule in failed
    assert why in failed[rule]


async def test_the_observing_reference_passes_the_observe_rules() -> None:
    """Described with every onion hook observing, the sidecar is checked for silence under
    every marker (and its unary hooks and tool as usual)."""
    running = await serve_middleware(ObservingConformanceMiddleware())
    try:
        results = await run_conformance(f"127.0.0.1:{running.port}", timeout=TIMEOUT)
    finally:
        await running.stop(None)
    assert [(r.name, r.detail) for r in results if not r.passed] == []
    names = [r.name for r in results]
    assert "observe.on_check_permission[agentic]" in names
    assert "call_tool" in names
    assert not any(name.startswith("on_reasoning.") for name in names)


async def test_an_observer_that_emits_fails_its_hook_s_observe_rule() -> None:
    failed = await _servicer_failures(broken.EmitsWhileObservingReasoning())
    assert sorted(failed) == ["observe.on_reasoning[agentic]", "observe.on_reasoning[flat]"]
    assert failed["observe.on_reasoning[flat]"].startswith(
        "expected silence (observe mode: the sidecar sends nothing back"
    )
    assert failed["observe.on_reasoning[flat]"].endswith(
        "(docs/remote-protocol.md § Any onion hook, HOOK_MODE_OBSERVE)"
    )


async def test_an_observer_that_answers_outcomes_fails_its_hook_s_observe_rule() -> None:
    failed = await _servicer_failures(broken.DonesObservedPermissions())
    assert sorted(failed) == [
        "observe.on_check_permission[agentic]",
        "observe.on_check_permission[flat]",
    ]
    assert "got done" in failed["observe.on_check_permission[flat]"]


async def test_emits_before_an_error_and_plain_dones_pass() -> None:
    """What the spec allows: an emit before the failing done, and a plain done ("unchanged")
    where the reference repeats the downstream's result."""
    for middleware, rule in (
        (broken.EmitsBeforeTheError(), "on_reasoning.error"),
        (broken.EmitsBeforeItsError(), "on_reasoning.error_after"),
        (broken.PermissionEmitsBeforeItsError(), "on_check_permission.error_after"),
    ):
        running = await serve_middleware(middleware)
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
                t = Target(pb_grpc.MiddlewareServiceStub(channel), (), TIMEOUT, False)
                await KIND_RULES[rule](t, "flat")
        finally:
            await running.stop(None)
    service = Service(
        SERVICE_NAME, broken.PlainDones(), pb_grpc.add_MiddlewareServiceServicer_to_server
    )
    running = await start_server([service], "127.0.0.1:0")
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            t = Target(pb_grpc.MiddlewareServiceStub(channel), (), TIMEOUT, False)
            for rule in (
                "on_model_call.emit",
                "on_check_permission.emit",
                "on_model_call.full",
                "on_check_permission.pass_through",
            ):
                await KIND_RULES[rule](t, "flat")
    finally:
        await running.stop(None)
