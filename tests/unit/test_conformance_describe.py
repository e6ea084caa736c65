"""The describe phase of the conformance kit: how a sidecar's described hooks are compared
with the conformance middleware's (docs/remote-protocol.md § Conformance, the Describe
table), hook by hook, with each difference named."""

from __future__ import annotations

import pytest

from hookmesh.conformance._stream_rules import _mode, hook_mismatches, hook_name
from hookmesh.v1 import middleware_pb2 as pb

INTERCEPT = pb.HOOK_MODE_INTERCEPT
PRE_ONLY = pb.HOOK_MODE_PRE_ONLY


def _spec(
    hook: int, mode: int = INTERCEPT, subs: tuple[str, ...] = (), read_only: tuple[str, ...] = ()
) -> pb.HookSpec:
    return pb.HookSpec(
        hook=hook,  # type: ignore[arg-type]
        mode=mode,  # type: ignore[arg-type]
        subscriptions=list(subs),
        read_only_subscriptions=list(read_only),
    )


def _reference() -> list[pb.HookSpec]:
    """The table of docs/remote-protocol.md § Conformance, written out by hand."""
    return [
        _spec(pb.HOOK_ON_REPLY, read_only=("*",)),
        _spec(pb.HOOK_ON_REASONING, subs=("*",)),
        _spec(pb.HOOK_ON_MODEL_CALL, subs=("chunk",)),
        _spec(pb.HOOK_ON_ACTING, subs=("*",)),
        _spec(pb.HOOK_ON_CHECK_PERMISSION),
        _spec(pb.HOOK_ON_COMPRESS_CONTEXT, PRE_ONLY),
        _spec(pb.HOOK_ON_SYSTEM_PROMPT),
        _spec(pb.HOOK_AFTER_AGENT),
    ]


def _described(*hooks: pb.HookSpec) -> pb.DescribeResponse:
    return pb.DescribeResponse(protocol_version=1, middleware_key="conformance", hooks=hooks)


def _replaced(hook: int, spec: pb.HookSpec) -> pb.DescribeResponse:
    """The reference's description with `hook`'s entry replaced by `spec`."""
    return _described(*(spec if h.hook == hook else h for h in _reference()))


def test_hook_names_drop_the_prefix_and_read_lower_case() -> None:
    assert hook_name(pb.HOOK_ON_REPLY) == "on_reply"
    assert hook_name(pb.HOOK_AFTER_AGENT) == "after_agent"
    assert hook_name(pb.HOOK_ON_CHECK_PERMISSION) == "on_check_permission"


def test_an_unset_mode_reads_as_intercept() -> None:
    assert _mode(pb.HOOK_MODE_UNSPECIFIED) == "INTERCEPT"
    assert _mode(INTERCEPT) == "INTERCEPT"
    assert _mode(PRE_ONLY) == "PRE_ONLY"
    assert _mode(pb.HOOK_MODE_OBSERVE) == "OBSERVE"


def test_the_reference_table_has_no_mismatch() -> None:
    assert hook_mismatches(_described(*_reference())) == []


def test_the_order_of_hooks_and_of_their_items_does_not_matter() -> None:
    hooks = list(reversed(_reference()))
    hooks[0] = _spec(pb.HOOK_AFTER_AGENT)
    assert hook_mismatches(_described(*hooks)) == []


def test_an_unset_mode_passes_where_intercept_is_expected() -> None:
    unset = _spec(pb.HOOK_ON_REPLY, pb.HOOK_MODE_UNSPECIFIED, read_only=("*",))
    assert hook_mismatches(_replaced(pb.HOOK_ON_REPLY, unset)) == []


@pytest.mark.parametrize(
    ("hook", "spec", "expected"),
    [
        (  # a mode after the expected one
            pb.HOOK_ON_REPLY,
            _spec(pb.HOOK_ON_REPLY, PRE_ONLY, read_only=("*",)),
            "on_reply: mode PRE_ONLY, expected INTERCEPT",
        ),
        (  # a mode before the expected one
            pb.HOOK_ON_COMPRESS_CONTEXT,
            _spec(pb.HOOK_ON_COMPRESS_CONTEXT, INTERCEPT),
            "on_compress_context: mode INTERCEPT, expected PRE_ONLY",
        ),
        (  # unset reads as INTERCEPT, which is not PRE_ONLY
            pb.HOOK_ON_COMPRESS_CONTEXT,
            _spec(pb.HOOK_ON_COMPRESS_CONTEXT, pb.HOOK_MODE_UNSPECIFIED),
            "on_compress_context: mode INTERCEPT, expected PRE_ONLY",
        ),
        (
            pb.HOOK_ON_COMPRESS_CONTEXT,
            _spec(pb.HOOK_ON_COMPRESS_CONTEXT, pb.HOOK_MODE_OBSERVE),
            "on_compress_context: mode OBSERVE, expected PRE_ONLY",
        ),
        (  # fewer subscriptions (a list sorting before the expected one)
            pb.HOOK_ON_REASONING,
            _spec(pb.HOOK_ON_REASONING),
            "on_reasoning: subscriptions [], expected ['*']",
        ),
        (  # other subscriptions (sorting after the expected ones)
            pb.HOOK_ON_REASONING,
            _spec(pb.HOOK_ON_REASONING, subs=("text_block_delta",)),
            "on_reasoning: subscriptions ['text_block_delta'], expected ['*']",
        ),
        (  # more subscriptions
            pb.HOOK_ON_MODEL_CALL,
            _spec(pb.HOOK_ON_MODEL_CALL, subs=("chunk", "stream_start")),
            "on_model_call: subscriptions ['chunk', 'stream_start'], expected ['chunk']",
        ),
        (  # subscriptions where none are expected
            pb.HOOK_ON_CHECK_PERMISSION,
            _spec(pb.HOOK_ON_CHECK_PERMISSION, subs=("*",)),
            "on_check_permission: subscriptions ['*'], expected []",
        ),
        (  # the reply's items subscribed instead of read only
            pb.HOOK_ON_REPLY,
            _spec(pb.HOOK_ON_REPLY, subs=("*",), read_only=("*",)),
            "on_reply: subscriptions ['*'], expected []",
        ),
        (
            pb.HOOK_ON_REPLY,
            _spec(pb.HOOK_ON_REPLY),
            "on_reply: read_only_subscriptions [], expected ['*']",
        ),
        (
            pb.HOOK_ON_REPLY,
            _spec(pb.HOOK_ON_REPLY, read_only=("reply_end",)),
            "on_reply: read_only_subscriptions ['reply_end'], expected ['*']",
        ),
        (
            pb.HOOK_ON_ACTING,
            _spec(pb.HOOK_ON_ACTING, subs=("*",), read_only=("*",)),
            "on_acting: read_only_subscriptions ['*'], expected []",
        ),
    ],
)
def test_each_difference_of_a_hook_is_named(hook: int, spec: pb.HookSpec, expected: str) -> None:
    assert hook_mismatches(_replaced(hook, spec)) == [expected]


def test_every_difference_of_one_hook_is_named_in_order() -> None:
    spec = _spec(pb.HOOK_ON_REPLY, PRE_ONLY, subs=("*",))
    assert hook_mismatches(_replaced(pb.HOOK_ON_REPLY, spec)) == [
        "on_reply: mode PRE_ONLY, expected INTERCEPT",
        "on_reply: subscriptions ['*'], expected []",
        "on_reply: read_only_subscriptions [], expected ['*']",
    ]


def test_a_hook_described_twice_is_named_once_per_repeat() -> None:
    hooks = [*_reference(), _spec(pb.HOOK_ON_REASONING, subs=("*",))]
    assert hook_mismatches(_described(*hooks)) == ["on_reasoning: described twice"]
    hooks.append(_spec(pb.HOOK_ON_REASONING, subs=("*",)))
    assert hook_mismatches(_described(*hooks)) == ["on_reasoning: described twice"] * 2


def test_a_repeated_hook_is_compared_again() -> None:
    hooks = [*_reference(), _spec(pb.HOOK_ON_COMPRESS_CONTEXT)]
    assert hook_mismatches(_described(*hooks)) == [
        "on_compress_context: described twice",
        "on_compress_context: mode INTERCEPT, expected PRE_ONLY",
    ]


def test_a_missing_hook_is_named() -> None:
    hooks = [h for h in _reference() if h.hook != pb.HOOK_AFTER_AGENT]
    assert hook_mismatches(_described(*hooks)) == ["after_agent: missing"]


def test_no_hooks_name_every_hook_missing_in_the_table_s_order() -> None:
    assert hook_mismatches(_described()) == [
        "on_reply: missing",
        "on_reasoning: missing",
        "on_model_call: missing",
        "on_acting: missing",
        "on_check_permission: missing",
        "on_compress_context: missing",
        "on_system_prompt: missing",
        "after_agent: missing",
    ]


def test_hooks_outside_the_conformance_middleware_are_named_and_the_rest_still_checked() -> None:
    """An unset hook and a number no Hook names: each is named (the latter by its number),
    and the hooks after them are still compared."""
    hooks = [
        _spec(pb.HOOK_UNSPECIFIED),
        _spec(99),
        *_reference()[:-1],
        _spec(pb.HOOK_AFTER_AGENT, PRE_ONLY),
    ]
    assert hook_mismatches(_described(*hooks)) == [
        "unspecified: not a hook of the conformance middleware",
        "hook 99: not a hook of the conformance middleware",
        "after_agent: mode PRE_ONLY, expected INTERCEPT",
    ]


def test_an_unknown_hook_described_twice_is_named_twice() -> None:
    hooks = [*_reference(), _spec(42), _spec(42)]
    assert hook_mismatches(_described(*hooks)) == [
        "hook 42: not a hook of the conformance middleware",
        "hook 42: described twice",
        "hook 42: not a hook of the conformance middleware",
    ]
