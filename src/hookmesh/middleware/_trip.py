"""Guardrail trips: a check that stops the reply on purpose. Unlike a middleware's failure, a
trip is never skipped under ``fail_open``, and the agent ends the reply with reason
``GUARDRAIL_TRIPPED`` and keeps out of the session what tripped (docs/middleware/guardrails.md)."""

from __future__ import annotations

from typing import Literal, TypeGuard

import grpc

from hookmesh.errors import HookmeshError

GUARDRAIL_TRIPPED = "GUARDRAIL_TRIPPED"
"""The reason of a reply a guardrail stopped."""

GuardrailStage = Literal["input", "output", "tool_arguments", "tool_result"]
"""What a guardrail checks: the user's input (before the model sees it), the final answer
(before the client sees it as final), a tool call's arguments (before it runs), or its
result (before the model sees it)."""

_WHAT: dict[str, str] = {
    "input": "the input",
    "output": "the answer",
    "tool_arguments": "a tool call's arguments",
    "tool_result": "a tool's result",
}


class GuardrailTripped(HookmeshError):
    """A guardrail tripped: the reply ends with reason ``GUARDRAIL_TRIPPED``, naming it.

    Args:
        guardrail: The guardrail's name.
        stage: What it checked.
        why: What it found (no secrets: it reaches the client).
        metadata: More variable parts of the message.
    """

    reason = GUARDRAIL_TRIPPED
    code = grpc.StatusCode.ABORTED

    def __init__(
        self,
        guardrail: str,
        stage: GuardrailStage,
        why: str,
        metadata: dict[str, str] | None = None,
    ) -> None:
        super().__init__(
            f"guardrail {guardrail} stopped {_WHAT[stage]}: {why}",
            metadata={**(metadata or {}), "guardrail": guardrail, "stage": stage},
        )


def is_trip(exc: BaseException) -> TypeGuard[HookmeshError]:
    """Whether `exc` is a guardrail's trip, raised here or reported by a sidecar (any error
    with reason ``GUARDRAIL_TRIPPED``)."""
    return isinstance(exc, HookmeshError) and exc.reason == GUARDRAIL_TRIPPED
