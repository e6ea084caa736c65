"""Hypothesis strategies for any protobuf message, built from its descriptor: every field
kind, oneofs, enums with unknown numbers, extreme scalars, out-of-range Timestamps, Structs
with NaN — the inputs a careless or hostile client can send."""

from __future__ import annotations

import math
from typing import Any

from google.protobuf import descriptor as d
from google.protobuf import message_factory, struct_pb2, timestamp_pb2
from hypothesis import strategies as st

_INT32 = st.one_of(
    st.sampled_from([0, 1, -1, 2**31 - 1, -(2**31)]), st.integers(-(2**31), 2**31 - 1)
)
_INT64 = st.one_of(st.sampled_from([0, -1, 2**63 - 1, -(2**63)]), st.integers(-(2**63), 2**63 - 1))
_UINT32 = st.one_of(st.sampled_from([0, 2**32 - 1]), st.integers(0, 2**32 - 1))
_UINT64 = st.one_of(st.sampled_from([0, 2**64 - 1]), st.integers(0, 2**64 - 1))
_FLOAT = st.one_of(
    st.sampled_from([0.0, -0.0, math.nan, math.inf, -math.inf, 1e308, -1e-308]),
    st.floats(allow_nan=True, allow_infinity=True, width=32),
)
_DOUBLE = st.one_of(
    st.sampled_from([0.0, math.nan, math.inf, -math.inf, 1e308]), st.floats(allow_nan=True)
)
_TEXT = st.one_of(
    st.sampled_from(["", " ", "\x00", "é", "a" * 5000, "../../etc/passwd", "x:y", "*"]),
    st.text(max_size=40),
)
_BYTES = st.one_of(st.sampled_from([b"", b"\x00" * 3, b"\xff" * 100]), st.binary(max_size=40))

_SCALARS: dict[int, st.SearchStrategy[Any]] = {
    d.FieldDescriptor.TYPE_INT32: _INT32,
    d.FieldDescriptor.TYPE_SINT32: _INT32,
    d.FieldDescriptor.TYPE_SFIXED32: _INT32,
    d.FieldDescriptor.TYPE_INT64: _INT64,
    d.FieldDescriptor.TYPE_SINT64: _INT64,
    d.FieldDescriptor.TYPE_SFIXED64: _INT64,
    d.FieldDescriptor.TYPE_UINT32: _UINT32,
    d.FieldDescriptor.TYPE_FIXED32: _UINT32,
    d.FieldDescriptor.TYPE_UINT64: _UINT64,
    d.FieldDescriptor.TYPE_FIXED64: _UINT64,
    d.FieldDescriptor.TYPE_FLOAT: _FLOAT,
    d.FieldDescriptor.TYPE_DOUBLE: _DOUBLE,
    d.FieldDescriptor.TYPE_BOOL: st.booleans(),
    d.FieldDescriptor.TYPE_STRING: _TEXT,
    d.FieldDescriptor.TYPE_BYTES: _BYTES,
}


def _timestamps() -> st.SearchStrategy[timestamp_pb2.Timestamp]:
    return st.builds(
        timestamp_pb2.Timestamp,
        seconds=st.one_of(st.sampled_from([0, 2**63 - 1, -(2**63), 253402300800]), _INT64),
        nanos=st.one_of(st.sampled_from([0, -1, 1_000_000_000, 999_999_999]), _INT32),
    )


_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), _DOUBLE, _TEXT),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)


def _structs() -> st.SearchStrategy[struct_pb2.Struct]:
    def build(values: dict[str, Any]) -> struct_pb2.Struct:
        out = struct_pb2.Struct()
        for key, value in values.items():
            _set_value(out.fields[key], value)
        return out

    return st.dictionaries(st.text(max_size=10), _JSON, max_size=4).map(build)


def _set_value(target: struct_pb2.Value, value: Any) -> None:
    """Set a Value without json_format's checks, so NaN and infinity get through."""
    if value is None:
        target.null_value = struct_pb2.NULL_VALUE
    elif isinstance(value, bool):
        target.bool_value = value
    elif isinstance(value, float):
        target.number_value = value
    elif isinstance(value, str):
        target.string_value = value
    elif isinstance(value, list):
        target.list_value.SetInParent()
        for item in value:
            _set_value(target.list_value.values.add(), item)
    else:
        target.struct_value.SetInParent()
        for key, item in value.items():
            _set_value(target.struct_value.fields[key], item)


_SPECIAL = {
    "google.protobuf.Timestamp": _timestamps,
    "google.protobuf.Struct": _structs,
}


def messages(descriptor: d.Descriptor, depth: int = 3) -> st.SearchStrategy[Any]:
    """Instances of the message `descriptor` describes, nested `depth` levels at most."""
    special = _SPECIAL.get(descriptor.full_name)
    if special is not None:
        return special()
    cls = message_factory.GetMessageClass(descriptor)
    if depth <= 0:
        return st.just(cls())
    plain = [f for f in descriptor.fields if f.containing_oneof is None]
    oneofs = list(descriptor.oneofs)

    @st.composite
    def build(draw: st.DrawFn) -> Any:
        out = cls()
        for field in plain:
            if draw(st.booleans()):
                _assign(out, field, draw, depth)
        for oneof in oneofs:
            choice = draw(st.sampled_from([None, *oneof.fields]))
            if choice is not None:
                _assign(out, choice, draw, depth)
        return out

    return build()


def _value_strategy(field: d.FieldDescriptor, depth: int) -> st.SearchStrategy[Any]:
    if field.type == d.FieldDescriptor.TYPE_ENUM:
        known = [v.number for v in field.enum_type.values]
        return st.one_of(st.sampled_from(known), st.sampled_from([99, -5, 2**31 - 1]))
    if field.type == d.FieldDescriptor.TYPE_MESSAGE:
        return messages(field.message_type, depth - 1)
    return _SCALARS[field.type]


def _assign(out: Any, field: d.FieldDescriptor, draw: st.DrawFn, depth: int) -> None:
    values = _value_strategy(field, depth)
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        key_field = field.message_type.fields_by_name["key"]
        value_field = field.message_type.fields_by_name["value"]
        entries = draw(
            st.dictionaries(
                _value_strategy(key_field, depth), _value_strategy(value_field, depth), max_size=2
            )
        )
        target = getattr(out, field.name)
        for key, value in entries.items():
            if value_field.message_type is not None:
                target[key].CopyFrom(value)
            else:
                target[key] = value
        return
    if field.is_repeated:
        items = draw(st.lists(values, max_size=3))
        target = getattr(out, field.name)
        if field.type == d.FieldDescriptor.TYPE_MESSAGE:
            for item in items:
                target.add().CopyFrom(item)
        else:
            target.extend(items)
        return
    value = draw(values)
    if field.type == d.FieldDescriptor.TYPE_MESSAGE:
        getattr(out, field.name).CopyFrom(value)
    else:
        setattr(out, field.name, value)


Path = tuple[d.FieldDescriptor, ...]
"""Message fields from a request down to one field, each step a singular, repeated or map
field."""


def paths_to(descriptor: d.Descriptor, full_name: str, depth: int = 6) -> list[Path]:
    """Every path from `descriptor` to a field whose message type is `full_name` (recursive
    types followed `depth` levels deep), so a test can plant a bad value in each place."""
    found: list[Path] = []

    def walk(message: d.Descriptor, path: Path) -> None:
        if len(path) >= depth:
            return
        for field in message.fields:
            target = field.message_type
            if target is None:
                continue
            if target.GetOptions().map_entry:
                target = target.fields_by_name["value"].message_type
                if target is None:
                    continue
            if target.full_name == full_name:
                found.append((*path, field))
            elif not target.full_name.startswith("google.protobuf."):
                walk(target, (*path, field))

    walk(descriptor, ())
    return found


def planted(descriptor: d.Descriptor, path: Path, value: Any) -> Any:
    """A request of `descriptor` holding `value` (a message) at `path` and nothing else."""
    out = message_factory.GetMessageClass(descriptor)()
    node = out
    for field in path:
        container = getattr(node, field.name)
        if field.message_type.GetOptions().map_entry:
            node = container["k"]
        elif field.is_repeated:
            node = container.add()
        else:
            node = container
    node.CopyFrom(value)
    return out


def bad_structs() -> list[struct_pb2.Struct]:
    """Structs no JSON can hold: NaN and infinities, at the top and nested."""
    out = []
    for number in (math.nan, math.inf, -math.inf):
        flat = struct_pb2.Struct()
        flat.fields["n"].number_value = number
        nested = struct_pb2.Struct()
        _set_value(nested.fields["n"], {"list": [1.0, {"deep": 0.0}]})
        nested.fields["n"].struct_value.fields["list"].list_value.values[1].struct_value.fields[
            "deep"
        ].number_value = number
        out += [flat, nested]
    return out


def bad_timestamps() -> list[timestamp_pb2.Timestamp]:
    """Timestamps outside what RFC 3339 (and protobuf's own checks) allow."""
    return [
        timestamp_pb2.Timestamp(nanos=-1),
        timestamp_pb2.Timestamp(nanos=1_000_000_000),
        timestamp_pb2.Timestamp(seconds=253402300800),
        timestamp_pb2.Timestamp(seconds=-(2**62)),
    ]
