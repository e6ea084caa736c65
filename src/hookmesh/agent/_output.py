"""Output schemas: the shape a reply's answer must have, checked once when it is given, its
validator compiled once per schema, and the checks of an answer against it."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from typing import Any, Literal

import jsonschema
from pydantic import BaseModel, ValidationError

from hookmesh.errors import FieldViolation, HookmeshError, SchemaError
from hookmesh.models import FINAL_TOOL, OutputFormat, json_text

OutputStrategy = Literal["auto", "native", "tool"]
"""How the model is asked: ``native`` (its JSON-schema mode), ``tool`` (a final-answer tool)
or ``auto`` (native when the model has the mode, else tool)."""

DEFAULT_MAX_RETRIES = 2
"""Times the model is asked again after an answer that does not validate, by default."""
MAX_RETRIES = 10
"""Most retries a schema may ask for."""
MAX_SCHEMA_BYTES = 64 * 1024
"""Largest output schema, as compact JSON."""
MAX_SCHEMA_DEPTH = 32
"""Deepest nesting of objects and arrays in an output schema."""
INVALID_OUTPUT_SCHEMA = "INVALID_OUTPUT_SCHEMA"
"""The reason of a `SchemaError` for a bad output schema."""

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_MESSAGE_LIMIT = 300
_STRATEGIES = ("auto", "native", "tool")


class OutputInvalidError(HookmeshError):
    """The model's answers never satisfied the reply's output schema."""

    reason = "OUTPUT_INVALID"
    source = "model"


class OutputProblem(ValueError):
    """Why one answer does not satisfy the schema: where (a JSON path from ``$``) and what."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"at {path}: {message}")
        self.path = path
        self.message = message


class OutputSpec:
    """An output schema, checked and compiled: build it with `output_spec`.

    Immutable and shared: one spec serves every reply that asks for it (the agent
    service builds its configured one once).
    """

    __slots__ = (
        "_format",
        "_tool",
        "_validator",
        "_wrapped",
        "description",
        "key",
        "max_retries",
        "model_type",
        "name",
        "schema",
        "strategy",
    )

    def __init__(
        self,
        name: str,
        schema: dict[str, Any],
        description: str,
        strategy: OutputStrategy,
        max_retries: int,
        key: str,
        model_type: type[BaseModel] | None = None,
    ) -> None:
        self.name = name
        """The shape's name (the model sees it; traces record it)."""
        self.schema = schema
        """The JSON Schema of the answer."""
        self.description = description
        """What the answer is for, told to the model."""
        self.strategy: OutputStrategy = strategy
        """How the model is asked."""
        self.max_retries = max_retries
        """Times the model is asked again after an invalid answer."""
        self.key = key
        """The canonical JSON of all of the above: equal keys, equal specs."""
        self.model_type = model_type
        """The pydantic model answers are parsed into, when built from one."""
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        self._validator = cls(schema)
        self._wrapped = schema.get("type") != "object"
        self._format = OutputFormat(name, schema, description)
        self._tool = _final_tool(name, schema, description, self._wrapped)

    @property
    def format(self) -> OutputFormat:
        """The format a model's JSON-schema mode is asked for."""
        return self._format

    @property
    def tool(self) -> dict[str, Any]:
        """The final-answer tool's definition (its parameters wrap a non-object schema in
        ``{"value": ...}``)."""
        return self._tool

    def check(self, value: Any) -> Any:
        """`value` if it satisfies the schema: parsed into `model_type` when there is one.

        Raises:
            OutputProblem: The first (most relevant) violation.
        """
        error = jsonschema.exceptions.best_match(self._validator.iter_errors(value))
        if error is not None:
            raise OutputProblem(_json_path(error.absolute_path), _clip(error.message))
        if self.model_type is None:
            return value
        try:
            return self.model_type.model_validate(value)
        except ValidationError as exc:
            first = exc.errors()[0]
            raise OutputProblem(_json_path(first["loc"]), _clip(first["msg"])) from None

    def parse(self, text: str) -> Any:
        """An answer text (a Markdown code fence around it is tolerated) as a checked value.

        Raises:
            OutputProblem: Not JSON, or not valid for the schema.
        """
        try:
            value = json.loads(json_text(text))
        except json.JSONDecodeError as exc:
            raise OutputProblem("$", f"not JSON: {exc.msg} (character {exc.pos})") from None
        except RecursionError:
            raise OutputProblem("$", "nested too deep") from None
        return self.check(value)

    def parse_call(self, arguments: str) -> Any:
        """A final-answer call's arguments as a checked value (unwrapped when wrapped).

        Raises:
            OutputProblem: Not a JSON object, or not valid for the schema.
        """
        try:
            value = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise OutputProblem("$", f"not JSON: {exc.msg} (character {exc.pos})") from None
        except RecursionError:
            raise OutputProblem("$", "nested too deep") from None
        if self._wrapped:
            if not isinstance(value, dict) or "value" not in value:
                raise OutputProblem("$", f"give the answer as {FINAL_TOOL}'s `value` argument")
            value = value["value"]
        return self.check(value)


def output_spec(
    output: type[BaseModel] | Mapping[str, Any] | OutputSpec,
    *,
    name: str = "",
    description: str = "",
    strategy: OutputStrategy = "auto",
    max_retries: int | None = None,
    field: str = "output",
) -> OutputSpec:
    """The spec of an output schema: a pydantic model, a JSON Schema, or a spec (returned
    as it is). Built once per distinct schema and cached, so asking again costs a lookup.

    Args:
        output: The answer's shape.
        name: Its name (1-64 characters of A-Z a-z 0-9 _ -); the model's class name, or
            ``output``, when empty.
        description: What the answer is for, told to the model.
        strategy: How the model is asked (`OutputStrategy`).
        max_retries: Times the model is asked again after an invalid answer (0-10);
            `DEFAULT_MAX_RETRIES` when None.
        field: Where the schema came from, for error paths (``output_schema`` over gRPC).

    Raises:
        SchemaError: Reason ``INVALID_OUTPUT_SCHEMA``: a bad name, strategy or retry count,
            or a schema that is not valid JSON Schema, too large, too deep, or refers outside
            itself (the violation's field is the path in it, e.g.
            ``output.schema.properties.age.type``).
    """
    if isinstance(output, OutputSpec):
        return output
    retries = DEFAULT_MAX_RETRIES if max_retries is None else max_retries
    if isinstance(output, type) and issubclass(output, BaseModel):
        return _typed(output, name or _type_name(output), description, strategy, retries, field)
    if not isinstance(output, Mapping):
        raise SchemaError.single(
            field, "give a pydantic model or a JSON Schema object", reason=INVALID_OUTPUT_SCHEMA
        )
    return _compiled(_key(name or "output", dict(output), description, strategy, retries), field)


def output_spec_of(raw: Any, field: str) -> OutputSpec:
    """The spec a JSON request gives (``{schema, name?, description?, strategy?,
    maxRetries?}``, as the AG-UI and A2A gateways take it).

    Raises:
        SchemaError: Reason ``INVALID_OUTPUT_SCHEMA``, the violation under `field`.
    """
    if not isinstance(raw, dict) or not isinstance(raw.get("schema"), dict):
        raise SchemaError.single(
            field, "must be {schema, name?, description?, strategy?, maxRetries?}",
            reason=INVALID_OUTPUT_SCHEMA,
        )  # fmt: skip
    retries = raw.get("maxRetries")
    return output_spec(
        raw["schema"],
        name=str(raw.get("name") or "output"),
        description=str(raw.get("description") or ""),
        strategy=raw.get("strategy") or "auto",
        max_retries=retries if isinstance(retries, int) and not isinstance(retries, bool) else None,
        field=field,
    )


def spec_from_key(key: str) -> OutputSpec:
    """The spec a `key` describes (a reply continued from its saved state): the one built
    from a pydantic model in this process when there is one, so answers parse into it."""
    return _TYPED.get(key) or _compiled(key, "output")


_TYPED: dict[str, OutputSpec] = {}
"""Specs built from pydantic models, by key: few (one per model class the program uses)."""


@functools.lru_cache(maxsize=64)
def _typed(
    model_type: type[BaseModel],
    name: str,
    description: str,
    strategy: OutputStrategy,
    max_retries: int,
    field: str,
) -> OutputSpec:
    key = _key(name, model_type.model_json_schema(), description, strategy, max_retries)
    plain = _compiled(key, field)
    spec = OutputSpec(
        plain.name,
        plain.schema,
        plain.description,
        plain.strategy,
        plain.max_retries,
        key,
        model_type,
    )
    _TYPED[key] = spec
    return spec


def _key(
    name: str, schema: dict[str, Any], description: str, strategy: str, max_retries: int
) -> str:
    return json.dumps(
        {
            "name": name,
            "schema": schema,
            "description": description,
            "strategy": strategy,
            "maxRetries": max_retries,
        },
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )


@functools.lru_cache(maxsize=256)
def _compiled(key: str, field: str) -> OutputSpec:
    """A spec from its key, after every check (cached: a schema is compiled once)."""
    data = json.loads(key)
    name, schema = data["name"], data["schema"]
    violations: list[FieldViolation] = []
    if not _NAME.fullmatch(name):
        violations.append(FieldViolation(f"{field}.name", "use 1-64 characters of A-Z a-z 0-9 _ -"))
    if data["strategy"] not in _STRATEGIES:
        violations.append(FieldViolation(f"{field}.strategy", "use auto, native or tool"))
    if not 0 <= data["maxRetries"] <= MAX_RETRIES:
        violations.append(
            FieldViolation(f"{field}.max_retries", f"must be between 0 and {MAX_RETRIES}")
        )
    violations.extend(_schema_violations(schema, f"{field}.schema"))
    if violations:
        raise SchemaError(violations, reason=INVALID_OUTPUT_SCHEMA)
    return OutputSpec(name, schema, data["description"], data["strategy"], data["maxRetries"], key)


def _schema_violations(schema: dict[str, Any], field: str) -> list[FieldViolation]:
    """What is wrong with `schema` as an output schema (at most one violation)."""
    if _depth(schema) > MAX_SCHEMA_DEPTH:
        return [FieldViolation(field, f"the schema nests more than {MAX_SCHEMA_DEPTH} levels")]
    size = len(json.dumps(schema, separators=(",", ":")).encode())
    if size > MAX_SCHEMA_BYTES:
        limit = f"the schema is {size} bytes as JSON; the limit is {MAX_SCHEMA_BYTES}"
        return [FieldViolation(field, limit)]
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    error = jsonschema.exceptions.best_match(cls(cls.META_SCHEMA).iter_errors(schema))
    if error is not None:
        where = _field_path(field, error.absolute_path)
        return [FieldViolation(where, f"not valid JSON Schema: {_clip(error.message)}")]
    for path, ref in _refs(schema):
        if not ref.startswith("#") or _pointer(schema, ref[1:]) is _MISSING:
            return [
                FieldViolation(
                    _field_path(field, path),
                    f"{ref!r} does not resolve: references must point inside the schema",
                )
            ]
    return []


_MISSING = object()


def _pointer(schema: Any, pointer: str) -> Any:
    """The part of `schema` a JSON Pointer names, or `_MISSING`."""
    node = schema
    for token in pointer.split("/")[1:] if pointer else ():
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return _MISSING
    return node


def _refs(schema: Any) -> list[tuple[list[Any], str]]:
    """Every ``$ref`` / ``$dynamicRef`` in `schema`, with its path (walked without recursion)."""
    out: list[tuple[list[Any], str]] = []
    stack: list[tuple[list[Any], Any]] = [([], schema)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("$ref", "$dynamicRef") and isinstance(value, str):
                    out.append(([*path, key], value))
                else:
                    stack.append(([*path, key], value))
        elif isinstance(node, list):
            stack.extend(([*path, i], item) for i, item in enumerate(node))
    return out


def _depth(value: Any) -> int:
    """How deeply `value` nests objects and arrays (walked without recursion)."""
    depth = 0
    level = [value] if isinstance(value, dict | list) else []
    while level and depth <= MAX_SCHEMA_DEPTH:
        depth += 1
        level = [
            child
            for item in level
            for child in (item.values() if isinstance(item, dict) else item)
            if isinstance(child, dict | list)
        ]
    return depth


def _final_tool(
    name: str, schema: dict[str, Any], description: str, wrapped: bool
) -> dict[str, Any]:
    parameters = schema
    if wrapped:
        inner = {k: v for k, v in schema.items() if k not in ("$defs", "definitions")}
        parameters = {
            "type": "object",
            "properties": {"value": inner},
            "required": ["value"],
            **{k: v for k, v in schema.items() if k in ("$defs", "definitions")},
        }
    about = f" ({description})" if description else ""
    return {
        "name": FINAL_TOOL,
        "description": (
            f"Give your final answer, a {name}{about}, as this tool's arguments. Call it once, "
            "when you are done, instead of answering in text."
        ),
        "parameters": parameters,
    }


def _type_name(model_type: type[BaseModel]) -> str:
    name = re.sub(r"[^A-Za-z0-9_-]", "_", model_type.__name__)[:64]
    return name or "output"


def _json_path(parts: Any) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)


def _field_path(field: str, parts: Any) -> str:
    return field + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)


def _clip(text: str) -> str:
    return text if len(text) <= _MESSAGE_LIMIT else text[: _MESSAGE_LIMIT - 1] + "…"
