"""`Limits` ⇄ `ReplyOptions.limits`: what a bounded caller lets a reply spend, on the wire."""

from __future__ import annotations

import math

from hookmesh.a2a import Limits
from hookmesh.errors import FieldViolation
from hookmesh.v1 import agent_pb2 as _agent_pb2


def limits_to_proto(limits: Limits) -> _agent_pb2.ReplyLimits:
    """The proto of `limits` (unset kinds left unset)."""
    pb = _agent_pb2.ReplyLimits()
    if limits.tool_calls is not None:
        pb.tool_calls = limits.tool_calls
    if limits.tokens is not None:
        pb.tokens = limits.tokens
    if limits.cost_usd is not None:
        pb.cost_usd = limits.cost_usd
    if limits.deadline is not None:
        seconds = math.floor(limits.deadline)
        pb.deadline.seconds = seconds
        pb.deadline.nanos = int((limits.deadline - seconds) * 1e9)
    return pb


def limits_from_proto(
    pb: _agent_pb2.ReplyLimits, field: str = "options.limits"
) -> tuple[Limits, list[FieldViolation]]:
    """The limits `pb` sets, and what is wrong with them (negative or not finite values)."""
    wrong: list[FieldViolation] = []
    if pb.HasField("tool_calls") and pb.tool_calls < 0:
        wrong.append(FieldViolation(f"{field}.tool_calls", "must not be negative"))
    if pb.HasField("tokens") and pb.tokens < 0:
        wrong.append(FieldViolation(f"{field}.tokens", "must not be negative"))
    if pb.HasField("cost_usd") and not (math.isfinite(pb.cost_usd) and pb.cost_usd >= 0):
        wrong.append(FieldViolation(f"{field}.cost_usd", "must be a finite number >= 0"))
    if pb.HasField("deadline") and not 0 <= pb.deadline.nanos < 1_000_000_000:
        wrong.append(FieldViolation(f"{field}.deadline", "nanos must be 0-999999999"))
    limits = Limits(
        tool_calls=pb.tool_calls if pb.HasField("tool_calls") else None,
        tokens=pb.tokens if pb.HasField("tokens") else None,
        cost_usd=pb.cost_usd if pb.HasField("cost_usd") else None,
        deadline=pb.deadline.seconds + pb.deadline.nanos / 1e9 if pb.HasField("deadline") else None,
    )
    return limits, wrong
