"""Guardrails: checks on the input, the final answer and tool calls that stop a reply when they
trip (docs/middleware/guardrails.md)."""

from hookmesh.middleware import GUARDRAIL_TRIPPED, GuardrailStage, GuardrailTripped
from hookmesh.middleware.builtin.guardrails._base import (
    Guardrail,
    GuardrailMode,
    GuardrailSubject,
    Verdict,
)
from hookmesh.middleware.builtin.guardrails._judge import (
    JudgeFailedError,
    JudgeGuardrail,
    JudgeVerdict,
)
from hookmesh.middleware.builtin.guardrails._length import LengthGuardrail
from hookmesh.middleware.builtin.guardrails._pattern import PatternGuardrail
from hookmesh.middleware.builtin.guardrails._schema import ToolSchemaGuardrail

__all__ = [
    "GUARDRAIL_TRIPPED",
    "Guardrail",
    "GuardrailMode",
    "GuardrailStage",
    "GuardrailSubject",
    "GuardrailTripped",
    "JudgeFailedError",
    "JudgeGuardrail",
    "JudgeVerdict",
    "LengthGuardrail",
    "PatternGuardrail",
    "ToolSchemaGuardrail",
    "Verdict",
]
