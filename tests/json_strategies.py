"""Hypothesis strategies for HTTP request bodies a careless or hostile client sends to a JSON
route: malformed JSON, deep nesting, bad UTF-8, huge values, and valid bodies with one value
swapped for another type."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import strategies as st

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([2**63, -(2**63) - 1, 2**64, 10**300]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
    st.sampled_from(["", "\x00", "é", "😀", "x" * 100_000, "../../etc/passwd", "ROLE_USER"]),
)
JSON = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=10,
)
"""Any JSON value."""

_BROKEN = st.sampled_from(
    [
        b"",
        b"{",
        b"[1,]",
        b'{"a" 1}',
        b"\xff\xfe{}",
        b'{"a": "\xc3"}',
        b"\xef\xbb\xbf{}",
        b"[" * 5000 + b"]" * 5000,
        b'{"a":' * 200 + b"1" + b"}" * 200,
        b'{"n": NaN}',
        b'{"n": -Infinity}',
        b'{"n": 1e400}',
        b'{"n": ' + b"1" * 5000 + b"}",
        b'{"s": "\\ud800"}',
        b'{"s": "\\udc00\\ud800"}',
        b'"' + b"a" * 900_000 + b'"',
        b"[" + b"0," * 20_000 + b"0]",
        b"null",
        b"12",
        b'"text"',
    ]
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside `value` (keys and indexes)."""
    out = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out += _paths(item, (*prefix, i))
    return out


def _swapped(valid: Any) -> st.SearchStrategy[Any]:
    """`valid` with the value at one path replaced by any JSON value (a wrong type)."""
    paths = _paths(valid)

    @st.composite
    def build(draw: st.DrawFn) -> Any:
        path = draw(st.sampled_from(paths))
        replacement = draw(JSON)
        if not path:
            return replacement
        out = copy.deepcopy(valid)
        node = out
        for step in path[:-1]:
            node = node[step]
        node[path[-1]] = replacement
        return out

    return build()


def bodies(valid: list[Any]) -> st.SearchStrategy[bytes]:
    """Bodies for a route whose valid bodies look like `valid`."""
    encoded = st.one_of(JSON, *(_swapped(v) for v in valid)).map(lambda v: json.dumps(v).encode())
    return st.one_of(_BROKEN, encoded, st.binary(max_size=64))
