"""The limits extension: what a bounded caller lets a remote agent spend (in the A2A message's
metadata), and what the agent reports it spent (in the task's final status update), so limits
set on a top reply hold across A2A hops. The wire format is docs/multi-agent.md's."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

LIMITS_EXTENSION_URI = "https://hookmesh.dev/a2a/extensions/limits/v1"
"""The extension's URI, declared in a hookmesh agent's card."""
LIMITS_METADATA_KEY = "hookmeshLimits"
"""Message metadata: ``{toolCalls?, tokens?, costUsd?, deadline?}``."""
SPENT_METADATA_KEY = "hookmeshSpent"
"""Final status update metadata: ``{toolCalls, tokens, costUsd}``."""


class LimitsError(ValueError):
    """A limits object that breaks the extension's rules; `field` names the bad member."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True, slots=True)
class Limits:
    """What a reply and everything below it may still spend; None: no limit of that kind."""

    tool_calls: int | None = None
    """Tool calls."""
    tokens: int | None = None
    """Model tokens, input plus output."""
    cost_usd: float | None = None
    """US dollars of model use."""
    deadline: float | None = None
    """When it must be over, in seconds since the Unix epoch."""

    def any(self) -> bool:
        """Whether any limit is set."""
        return any(
            v is not None for v in (self.tool_calls, self.tokens, self.cost_usd, self.deadline)
        )


@dataclass(frozen=True, slots=True)
class Spent:
    """What a reply and everything below it spent."""

    tool_calls: int = 0
    tokens: int = 0
    cost_usd: float = 0.0


MAX_TOOL_CALLS = 2**31 - 1
"""The most tool calls a limit may name (the agent service's int32)."""
MAX_TOKENS = 2**63 - 1
"""The most tokens a limit may name (the agent service's int64)."""


def _whole(field: str, value: Any, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise LimitsError(field, "must be a whole number")
    if isinstance(value, float) and (not math.isfinite(value) or not value.is_integer()):
        raise LimitsError(field, "must be a whole number")
    if value < 0:
        raise LimitsError(field, "must not be negative")
    if value > maximum:
        raise LimitsError(field, f"must be at most {maximum}")
    return int(value)


def _amount(field: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise LimitsError(field, "must be a finite number")
    if value < 0:
        raise LimitsError(field, "must not be negative")
    return float(value)


def _instant(field: str, value: Any) -> float:
    if not isinstance(value, str):
        raise LimitsError(field, "must be an RFC 3339 time with a zone, as a string")
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise LimitsError(field, "must be an RFC 3339 time with a zone") from None
    if when.tzinfo is None:
        raise LimitsError(field, "must name its zone (Z or an offset)")
    return when.timestamp()


_KEYS = {"toolCalls", "tokens", "costUsd", "deadline"}


def limits_of(raw: Any, where: str = f"metadata.{LIMITS_METADATA_KEY}") -> Limits:
    """The limits an A2A message's metadata holds.

    Raises:
        LimitsError: `raw` is not an object of the extension's members with valid values.
    """
    if not isinstance(raw, dict):
        raise LimitsError(where, "must be an object")
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise LimitsError(f"{where}.{unknown[0]}", "unknown member")
    calls, tokens, cost, deadline = (
        raw.get(k) for k in ("toolCalls", "tokens", "costUsd", "deadline")
    )
    return Limits(
        tool_calls=None if calls is None else _whole(f"{where}.toolCalls", calls, MAX_TOOL_CALLS),
        tokens=None if tokens is None else _whole(f"{where}.tokens", tokens, MAX_TOKENS),
        cost_usd=None if cost is None else _amount(f"{where}.costUsd", cost),
        deadline=None if deadline is None else _instant(f"{where}.deadline", deadline),
    )


def limits_json(limits: Limits) -> dict[str, Any]:
    """The extension's object for `limits` (unset members left out)."""
    out: dict[str, Any] = {}
    if limits.tool_calls is not None:
        out["toolCalls"] = limits.tool_calls
    if limits.tokens is not None:
        out["tokens"] = limits.tokens
    if limits.cost_usd is not None:
        out["costUsd"] = limits.cost_usd
    if limits.deadline is not None:
        when = datetime.fromtimestamp(limits.deadline, UTC)
        out["deadline"] = when.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return out


def spent_json(spent: Spent) -> dict[str, Any]:
    """The extension's report of `spent`."""
    return {"toolCalls": spent.tool_calls, "tokens": spent.tokens, "costUsd": spent.cost_usd}


def spent_of(raw: Any) -> Spent | None:
    """The report a final status update's metadata holds; None when it holds none or a bad
    one (the caller then charges one tool call)."""
    if not isinstance(raw, dict):
        return None
    try:
        return Spent(
            tool_calls=_whole("toolCalls", raw.get("toolCalls", 0), MAX_TOOL_CALLS),
            tokens=_whole("tokens", raw.get("tokens", 0), MAX_TOKENS),
            cost_usd=_amount("costUsd", raw.get("costUsd", 0.0)),
        )
    except LimitsError:
        return None
