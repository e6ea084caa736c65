"""The demo model's structured answers: the smallest value a JSON Schema accepts, its text
fields holding what the model would have said, so a schema given offline shows a typed answer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_MAX_DEPTH = 16
_SCALARS: dict[str, Any] = {"integer": 0, "number": 0, "boolean": True, "null": None}


def instance_of(schema: Mapping[str, Any], text: str) -> Any:
    """A value valid for the common shapes of `schema` (objects with their required
    properties, arrays of one item, enums and consts, `anyOf`/`oneOf`'s first branch, local
    `$ref`s, numeric minimums, string lengths): every string is `text`, cut or padded to fit.
    Patterns and formats are not honoured: such an answer fails validation as a real
    model's would."""
    return _value(schema, schema, text, 0)


def _value(schema: Mapping[str, Any], root: Mapping[str, Any], text: str, depth: int) -> Any:
    if depth > _MAX_DEPTH:
        return None
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part, {}) if isinstance(target, Mapping) else {}
        return _value(target, root, text, depth + 1)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for branches in ("anyOf", "oneOf", "allOf"):
        if schema.get(branches):
            return _value(schema[branches][0], root, text, depth + 1)
    kind = schema.get("type", "object" if "properties" in schema else "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        properties = schema.get("properties", {})
        wanted = schema.get("required", list(properties))
        return {
            name: _value(properties.get(name, {}), root, text, depth + 1)
            for name in wanted
            if isinstance(name, str)
        }
    if kind == "array":
        count = max(1, int(schema.get("minItems", 1)))
        return [_value(schema.get("items", {}), root, text, depth + 1) for _ in range(count)]
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum"))
        if low is None:
            return _SCALARS[kind]
        return int(low) + (1 if "exclusiveMinimum" in schema else 0)
    if kind in _SCALARS:
        return _SCALARS[kind]
    short, long = int(schema.get("minLength", 0)), schema.get("maxLength")
    value = text if long is None else text[: int(long)]
    return value.ljust(short, ".")
