"""The conformance kit's rules run once per sidecar (conformance/_stream_rules.py): the
description, the stream's cancels, ids and ends, the unary RPCs, the tool and the token.

Each broken sidecar of tests/broken_conformance.py, served in process on loopback, breaks
one of them, and that rule fails saying how; where a case is not broken (what the spec
allows), the rule passes. The reference passing every rule is checked in
test_conformance_broken.py."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from hookmesh.conformance import ConformanceMiddleware
from hookmesh.conformance._rules import Target
from hookmesh.conformance._session import RuleFailure
from hookmesh.conformance._stream_rules import STREAM_RULES, token_required
from hookmesh.middleware import Middleware
from hookmesh.remote._host import MiddlewareServicer
from tests import broken_conformance as broken
from tests.conformance_target import TIMEOUT, Serve, target

__all__ = ["target"]  # the served-sidecar fixture, shared by the conformance tests

pytestmark = pytest.mark.timeout(120)

BROKEN: list[tuple[Callable[[], Middleware | MiddlewareServicer], str, str]] = [
    # describe
    (broken.SpeaksVersion2, "describe", "protocol_version 2"),
    (broken.SpeaksNoVersion, "describe", "protocol_version 0"),
    (broken.WrongKey, "describe", "middleware_key 'not-conformance'"),
    (broken.KeyBeforeConformance, "describe", "middleware_key 'agent'"),
    (broken.ReplyPreOnly, "describe", "on_reply: mode PRE_ONLY, expected INTERCEPT"),
    (broken.DescribesAnotherTool, "describe", "tool conformance_echo missing"),
    (broken.NoTools, "describe", "tool conformance_echo missing"),
    (broken.WritableEcho, "describe", "conformance_echo is not read_only"),
    # the stream
    (broken.IgnoresCancel, "stream.cancel_mid_invocation", "a cancelled invocation gets no"),
    (
        broken.AnswersLateAfterCancel,
        "stream.cancel_mid_invocation",
        "expected silence (a cancelled invocation gets no answer; for invocation '1'), got done",
    ),
    (broken.AnswersAtTheDeadline, "stream.deadline_then_cancel", "got done"),
    (
        broken.AnswersUnknownInvocations,
        "stream.unknown_invocations_ignored",
        "sent done for invocation 'ghost', which the agent never started on this stream",
    ),
    (broken.EmitsBeforeEachCallNext, "stream.interleaved_invocations", "answers for ['"),
    (broken.IgnoresOverride, "stream.interleaved_invocations", "b's override lost"),
    (broken.OverridesWrongly, "stream.interleaved_invocations", "b's override lost"),
    (broken.OverridesUnasked, "stream.interleaved_invocations", "a got b's override"),
    (
        broken.SharesInvocations,
        "stream.ids_restart_per_stream",
        "the answer to the second stream's invocation 1 came on the first stream",
    ),
    (broken.IgnoresOverride, "stream.ids_restart_per_stream", "the second stream's override"),
    (broken.OverridesWrongly, "stream.ids_restart_per_stream", "the second stream's override"),
    (broken.FailsAtClose, "stream.ids_restart_per_stream", "stream ended with INTERNAL"),
    (
        broken.FailsAtClose,
        "stream.clean_close_cancels_open",
        "closing the requests ended the stream INTERNAL",
    ),
    (broken.DoublesDone, "stream.nothing_after_done", "after its done"),
    # the unary RPCs
    (broken.KeepsThePrompt, "transform_system_prompt", "prompt 'base'"),
    (broken.PromptsTwice, "transform_system_prompt", "prompt 'base [conformance] [conformance]'"),
    (broken.CountsInThePrompt, "transform_system_prompt", "changed the state"),
    (
        broken.AfterAgentWithoutFinal,
        "after_agent",
        "AfterAgent without a final message did not fail with INVALID_ARGUMENT",
    ),
    (broken.AfterAgentFailsOtherwise, "after_agent", "no final message: FAILED_PRECONDITION"),
    (broken.ForgetsAfterAgent, "after_agent", "state None"),
    # the tool
    (broken.EchoesHello, "call_tool", "streamed 'hello'"),
    (broken.EchoesTwice, "call_tool", "streamed 'hello "),
    (broken.EchoEndsWithAnEmptyPiece, "call_tool", "echo did not end with end=SUCCESS"),
    (broken.EchoEndsWithText, "call_tool", "echo did not end with end=SUCCESS"),
    (broken.EchoEndsWithError, "call_tool", "echo did not end with end=SUCCESS"),
    (broken.FailEndsWithSuccess, "call_tool", "fail did not end with ERROR"),
    (broken.FailEndsInterrupted, "call_tool", "fail did not end with ERROR"),
    (broken.LenientArguments, "call_tool", "arguments 'not json' were not refused"),
    (broken.BadArgumentsCrash, "call_tool", "arguments 'not json': INTERNAL"),
    (broken.EchoesNumbers, "call_tool", """arguments '{"text": 5}' were not refused"""),
    (broken.UnknownToolUnimplemented, "call_tool", "unknown tool: UNIMPLEMENTED"),
    (broken.UnknownToolAnswered, "call_tool", "an unknown tool did not fail with NOT_FOUND"),
]


@pytest.mark.parametrize(
    ("sidecar", "rule", "why"),
    BROKEN,
    ids=[f"{c[0].__name__}-{c[1]}" for c in BROKEN],
)
async def test_a_broken_sidecar_fails_the_rule_it_breaks(
    target: Serve, sidecar: Callable[[], Middleware | MiddlewareServicer], rule: str, why: str
) -> None:
    t = await target(sidecar())
    with pytest.raises(RuleFailure) as failure:
        await STREAM_RULES[rule](t)
    assert why in str(failure.value)


ALLOWED: list[tuple[Callable[[], Middleware | MiddlewareServicer], str]] = [
    (broken.LeavesTheFailureModeUnset, "describe"),
    (broken.Negotiating, "describe"),
    # A sidecar that never answers a cancelled hook passes the rule that never sends it
    # anything more, and breaks only the one that does.
    (broken.IgnoresCancel, "stream.deadline_then_cancel"),
    # An emit before call_next is allowed by the protocol: the rule reads the call_next.
    (broken.EmitsBeforeEachCallNext, "stream.ids_restart_per_stream"),
    # A tool streams its text in as many pieces as it likes: the last one ends it.
    (broken.StreamsInPieces, "call_tool"),
]


@pytest.mark.parametrize(
    ("sidecar", "rule"), ALLOWED, ids=[f"{c[0].__name__}-{c[1]}" for c in ALLOWED]
)
async def test_what_the_spec_allows_passes(
    target: Serve, sidecar: Callable[[], Middleware | MiddlewareServicer], rule: str
) -> None:
    await STREAM_RULES[rule](await target(sidecar()))


async def test_a_late_answer_after_cancel_fails_both_cancel_rules(target: Serve) -> None:
    """It comes 0.6 s after the cancel: within the 1.5 s the kit waits."""
    t = await target(broken.AnswersLateAfterCancel())
    for rule in ("stream.deadline_then_cancel", "stream.cancel_mid_invocation"):
        with pytest.raises(RuleFailure, match="got done"):
            await STREAM_RULES[rule](t)


async def test_a_sidecar_without_a_token_fails_the_token_rule(target: Serve) -> None:
    """The runner was given a token, but the sidecar answers without one."""
    open_one = await target(ConformanceMiddleware())
    t = Target(open_one.stub, (("authorization", "Bearer s3cret"),), TIMEOUT, True)
    with pytest.raises(RuleFailure, match="a call without the bearer token succeeded"):
        await token_required(t)
    await token_required(await target(ConformanceMiddleware(), token="s3cret"))


async def test_refusing_a_call_without_a_token_otherwise_fails_the_token_rule(
    target: Serve,
) -> None:
    t = await target(broken.RefusesWithoutTokenOtherwise())
    with pytest.raises(RuleFailure, match=r"^no token: PERMISSION_DENIED$"):
        await token_required(t)
