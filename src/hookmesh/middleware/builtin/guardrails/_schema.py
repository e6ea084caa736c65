"""The schema guardrail: a JSON Schema per tool that a call's arguments must also satisfy
(stricter than the tool's own: allowed hosts, a path prefix, an amount's ceiling)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hookmesh.agent import OutputProblem, output_spec
from hookmesh.errors import SchemaError
from hookmesh.middleware import AgentView
from hookmesh.middleware.builtin.guardrails._base import Guardrail, GuardrailSubject, Verdict


class ToolSchemaGuardrail(Guardrail):
    """Trips a tool call whose arguments do not satisfy the schema given for its tool, before
    the tool runs; calls of tools without a schema pass. Each schema is checked and compiled
    once, here, as an output schema is (local references only, size and depth bounded).

    Args:
        schemas: Per tool name, the JSON Schema its arguments must satisfy.
        **options: `Guardrail` options: name, failure_mode (the stage is always
            ``tool_arguments``, and only the named tools are checked).

    Raises:
        ValueError: A schema that is not valid JSON Schema (its tool and path named).

    Example:
        >>> ToolSchemaGuardrail(
        ...     {"fetch": {"properties": {"url": {"pattern": "^https://docs[.]example[.]com/"}}}}
        ... )
    """

    default_name = "tool_schema"

    def __init__(self, schemas: Mapping[str, Mapping[str, Any]], **options: Any) -> None:
        super().__init__(stages=("tool_arguments",), tools=list(schemas), **options)
        self._specs = {}
        for tool, schema in schemas.items():
            try:
                self._specs[tool] = output_spec(schema, field=f"schemas.{tool}")
            except SchemaError as exc:
                raise ValueError(str(exc)) from None

    def check(self, agent: AgentView, subject: GuardrailSubject) -> Verdict:
        spec = self._specs.get(subject.tool)
        if spec is None:
            return None
        try:
            spec.check(dict(subject.arguments))
        except OutputProblem as problem:
            return f"{subject.tool} {problem}"
        return None
