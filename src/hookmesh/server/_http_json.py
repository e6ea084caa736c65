"""The JSON a gateway accepts: UTF-8, standard (no NaN, no Infinity), within the depth and item
limits, no lone surrogates, no number beyond a double, checked once before any app parses it."""

from __future__ import annotations

import json
import math
from typing import Any, NoReturn

from hookmesh.server._http_errors import HttpRefusal


def _not_json(message: str) -> HttpRefusal:
    return HttpRefusal(400, "INVALID_JSON", message)


def _constant(name: str) -> NoReturn:
    raise _not_json(f"{name} is not JSON")


def _text(value: str) -> None:
    # NOTE(hookmesh): ``isascii`` is O(1) on CPython's compact strings, so only non-ASCII
    # text pays for the encode that finds a lone surrogate (protobuf and every encoder later
    # fail on one with an error the caller cannot read).
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise _not_json("a string holds a lone surrogate (\\ud800-\\udfff)") from None


def _scalar(value: Any) -> None:
    if isinstance(value, str):
        _text(value)
    elif isinstance(value, float) and not math.isfinite(value):
        raise _not_json("a number is too large for a double")


def check_json(body: bytes, max_depth: int, max_items: int) -> None:
    """Refuse a body that is not acceptable JSON.

    Raises:
        HttpRefusal: 400 ``INVALID_JSON`` (not UTF-8, not JSON, NaN or Infinity, a lone
            surrogate, a number beyond a double or an integer over 4,300 digits), 413
            ``JSON_TOO_DEEP`` or 413 ``TOO_MANY_ITEMS``.
    """
    too_deep = HttpRefusal(
        413, "JSON_TOO_DEEP", f"the JSON body nests deeper than {max_depth} levels"
    )
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise _not_json("the body is not UTF-8") from None
    try:
        value = json.loads(text, parse_constant=_constant)
    except RecursionError:
        raise too_deep from None
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise _not_json(f"the body is not JSON: {exc.msg} at {where}") from None
    except ValueError:  # int()'s limit on digits
        raise _not_json("an integer has more than 4,300 digits") from None
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if not isinstance(node, dict | list):
            _scalar(node)
            continue
        if depth > max_depth:
            raise too_deep
        if len(node) > max_items:
            raise HttpRefusal(
                413, "TOO_MANY_ITEMS", f"a JSON array or object holds more than {max_items} items"
            )
        items = node.values() if isinstance(node, dict) else node
        if isinstance(node, dict):
            for key in node:
                _text(key)
        for item in items:
            if isinstance(item, dict | list):
                stack.append((item, depth + 1))
            else:
                _scalar(item)
