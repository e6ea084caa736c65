"""Checks of middleware constructor arguments: a bad value raises ValueError naming it."""

from __future__ import annotations

from typing import Any

from hookmesh.middleware._base import FailureMode


def whole(name: str, value: Any, minimum: int = 1) -> int:
    """`value` when it is an int (not a bool) of at least `minimum`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, not {value!r}")
    return value


def optional_whole(name: str, value: Any, minimum: int = 1) -> int | None:
    """`value` when it is None or an int (not a bool) of at least `minimum`."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum} or None, not {value!r}")
    return value


def positive(name: str, value: Any) -> float:
    """`value` as a float when it is a number (not a bool) above zero."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"{name} must be a number > 0, not {value!r}")
    return float(value)


def flag(name: str, value: Any) -> bool:
    """`value` when it is a bool."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be a bool, not {value!r}")
    return value


def failure(value: Any) -> FailureMode:
    """`value` when it is a failure mode."""
    if value not in ("fail_closed", "fail_open"):
        raise ValueError(f"failure_mode must be 'fail_closed' or 'fail_open', not {value!r}")
    return value  # type: ignore[no-any-return]


def names(name: str, value: Any) -> frozenset[str]:
    """`value` as a set of non-empty names, when it is a collection of strings (not one)."""
    if isinstance(value, str):
        raise ValueError(f"{name} must be a collection of names, not one string")
    out = frozenset(value)
    if not all(isinstance(n, str) and n for n in out):
        raise ValueError(f"{name} must hold non-empty names")
    return out
