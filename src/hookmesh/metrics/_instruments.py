"""hookmesh's OpenTelemetry instruments and the functions that record on them.

Instruments come from the global meter provider through the API's proxy, so they may be
made before a provider is installed (or when none ever is: then recording does nothing).
"""

from __future__ import annotations

from opentelemetry import metrics

_DURATION_BUCKETS = (
    0.01,
    0.02,
    0.04,
    0.08,
    0.16,
    0.32,
    0.64,
    1.28,
    2.56,
    5.12,
    10.24,
    20.48,
    40.96,
    81.92,
)
"""Seconds: the GenAI conventions' advice for gen_ai.client.operation.duration."""
_TOKEN_BUCKETS = (
    1,
    4,
    16,
    64,
    256,
    1024,
    4096,
    16384,
    65536,
    262144,
    1048576,
    4194304,
    16777216,
    67108864,
)
"""Tokens: the GenAI conventions' advice for gen_ai.client.token.usage."""
_FAST_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
"""Seconds, for remote hook round trips (sub-millisecond on loopback)."""

_meter = metrics.get_meter("hookmesh")

REPLIES = _meter.create_counter(
    "hookmesh.agent.replies", "{reply}", "Replies that ended, by finish reason."
)
REPLY_DURATION = _meter.create_histogram(
    "hookmesh.agent.reply.duration",
    "s",
    "Time from a reply's start (or resume) to its end.",
    explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
)
OPERATION_DURATION = _meter.create_histogram(
    "gen_ai.client.operation.duration",
    "s",
    "GenAI operation duration: one model call, a stream until its last chunk.",
    explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
)
TOKEN_USAGE = _meter.create_histogram(
    "gen_ai.client.token.usage",
    "{token}",
    "Tokens used per model call, by gen_ai.token.type (input, output).",
    explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS,
)
TOOL_CALLS = _meter.create_counter(
    "hookmesh.tool.calls", "{call}", "Tool runs that ended, by tool and result state."
)
TOOL_DURATION = _meter.create_histogram(
    "hookmesh.tool.duration",
    "s",
    "Time one tool run took.",
    explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
)
MIDDLEWARE_ERRORS = _meter.create_counter(
    "hookmesh.middleware.errors",
    "{error}",
    "Middleware failures: fail_closed ones ended a reply, fail_open ones were skipped.",
)
REMOTE_HOOK_DURATION = _meter.create_histogram(
    "hookmesh.remote.hook.duration",
    "s",
    "One remote hook invocation, from the agent's first message to the sidecar's last.",
    explicit_bucket_boundaries_advisory=_FAST_BUCKETS,
)

REMOTE_CIRCUITS_OPEN = _meter.create_up_down_counter(
    "hookmesh.remote.circuits.open",
    "{circuit}",
    "Sidecar links whose circuit breaker is open: their calls are skipped or fail fast.",
)
REMOTE_CIRCUIT_REJECTIONS = _meter.create_counter(
    "hookmesh.remote.circuit.rejections",
    "{call}",
    "Calls to a sidecar refused at once because its circuit breaker is open.",
)


def record_circuit(sidecar: str, opened: bool) -> None:
    """Count a sidecar link's circuit breaker opening (`opened`) or closing again.

    Args:
        sidecar: The sidecar's address.
        opened: True when it opened, False when a probe closed it.
    """
    REMOTE_CIRCUITS_OPEN.add(1 if opened else -1, {"hookmesh.sidecar": sidecar})


def record_circuit_rejection(sidecar: str, middleware: str) -> None:
    """Count one call refused by an open circuit breaker (no message was sent)."""
    attributes = {"hookmesh.sidecar": sidecar, "hookmesh.middleware": middleware}
    REMOTE_CIRCUIT_REJECTIONS.add(1, attributes)


def record_middleware_error(middleware: str, failure_mode: str, hook: str = "") -> None:
    """Count one middleware failure (the agent calls this; cheap, and only on errors).

    Args:
        middleware: The middleware's key.
        failure_mode: ``fail_closed`` (it ended the reply) or ``fail_open`` (it was skipped).
        hook: The hook that failed, when known.
    """
    attributes = {"hookmesh.middleware": middleware, "hookmesh.failure_mode": failure_mode}
    if hook:
        attributes["hookmesh.hook"] = hook
    MIDDLEWARE_ERRORS.add(1, attributes)


def record_remote_hook(middleware: str, hook: str, seconds: float, error: str = "") -> None:
    """Record one remote hook invocation's latency, for the remote proxy to call.

    Args:
        middleware: The remote middleware's key.
        hook: The hook (``on_reasoning``, ...).
        seconds: From the invocation's first message to the sidecar's last answer.
        error: The error's reason when the invocation failed (``SIDECAR_DEADLINE_EXCEEDED``
            ...), else empty.
    """
    attributes = {"hookmesh.middleware": middleware, "hookmesh.hook": hook}
    if error:
        attributes["error.type"] = error
    REMOTE_HOOK_DURATION.record(seconds, attributes)


def record_reply(agent_name: str, finish_reason: str, seconds: float) -> None:
    """Count one ended reply (or resumed part of one) and its duration."""
    attributes = {"gen_ai.agent.name": agent_name, "hookmesh.finish_reason": finish_reason}
    REPLIES.add(1, attributes)
    REPLY_DURATION.record(seconds, attributes)


def record_model_call(
    attributes: dict[str, str], seconds: float, input_tokens: int | None, output_tokens: int | None
) -> None:
    """Record one model call: its duration and, when reported, its token usage.

    Args:
        attributes: ``gen_ai.operation.name``, ``gen_ai.provider.name``,
            ``gen_ai.request.model`` and, for a failure, ``error.type``.
        seconds: The call's duration (a stream: until its last chunk).
        input_tokens: Prompt tokens, or None when not reported.
        output_tokens: Completion tokens, or None when not reported.
    """
    OPERATION_DURATION.record(seconds, attributes)
    if input_tokens is not None:
        TOKEN_USAGE.record(input_tokens, {**attributes, "gen_ai.token.type": "input"})
    if output_tokens is not None:
        TOKEN_USAGE.record(output_tokens, {**attributes, "gen_ai.token.type": "output"})


def record_tool_call(name: str, state: str, seconds: float) -> None:
    """Count one tool run by its result's state, and its duration."""
    TOOL_DURATION.record(seconds, {"gen_ai.tool.name": name})
    TOOL_CALLS.add(1, {"gen_ai.tool.name": name, "hookmesh.tool.state": state})


ROLLOUT_SHADOW_COMPARISONS = _meter.create_counter(
    "hookmesh.rollout.shadow.comparisons",
    "{invocation}",
    "Shadow invocations compared with the live middleware, by outcome (agree or the kind "
    "of disagreement).",
)
ROLLOUT_SHADOW_DURATION = _meter.create_histogram(
    "hookmesh.rollout.shadow.duration",
    "s",
    "Time a shadow candidate took per invocation (the live side never waits for it).",
    explicit_bucket_boundaries_advisory=_FAST_BUCKETS,
)
ROLLOUT_CANARY_REPLIES = _meter.create_counter(
    "hookmesh.rollout.canary.replies",
    "{reply}",
    "Replies a canary middleware served, by whether they failed.",
)


def record_shadow_comparison(middleware: str, outcome: str, seconds: float, failed: bool) -> None:
    """Count one shadow invocation and its duration.

    Args:
        middleware: The live middleware's key.
        outcome: ``agree`` or the disagreement's kind (docs/rollout.md).
        seconds: How long the candidate took.
        failed: Whether the candidate failed (``error.type`` is then ``candidate``).
    """
    attributes = {"hookmesh.middleware": middleware, "hookmesh.rollout.outcome": outcome}
    ROLLOUT_SHADOW_COMPARISONS.add(1, attributes)
    timing = {"hookmesh.middleware": middleware}
    if failed:
        timing["error.type"] = "candidate"
    ROLLOUT_SHADOW_DURATION.record(seconds, timing)


def record_canary_reply(middleware: str, failed: bool) -> None:
    """Count one reply a canary served."""
    attributes = {"hookmesh.middleware": middleware, "hookmesh.rollout.failed": str(failed).lower()}
    ROLLOUT_CANARY_REPLIES.add(1, attributes)
