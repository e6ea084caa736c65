"""The caller's own tools (ReplyRequest.client_tools) as external tools of one reply."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from hookmesh.agent import Tool, external_tool
from hookmesh.errors import FieldViolation, SchemaError
from hookmesh.schema import struct_from_proto
from hookmesh.v1 import agent_pb2 as _agent_pb2

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MAX_CLIENT_TOOLS = 64
"""Most tools one request may declare."""
_NO_ARGUMENTS: dict[str, Any] = {"type": "object", "properties": {}}


def client_tools(pbs: Sequence[_agent_pb2.ClientTool], taken: set[str]) -> list[Tool]:
    """External tools for `pbs`, which must not reuse a name in `taken` (the agent's tools).

    Raises:
        SchemaError: Too many tools, or bad or clashing names (one violation each), reason
            ``INVALID_CLIENT_TOOLS``.
    """
    if len(pbs) > MAX_CLIENT_TOOLS:
        raise SchemaError.single(
            "client_tools",
            f"{len(pbs)} tools; the limit is {MAX_CLIENT_TOOLS}",
            reason="INVALID_CLIENT_TOOLS",
        )
    names = set(taken)
    violations: list[FieldViolation] = []
    out: list[Tool] = []
    for i, pb in enumerate(pbs):
        field = f"client_tools[{i}].name"
        if not _TOOL_NAME.fullmatch(pb.name):
            violations.append(FieldViolation(field, "use 1-64 characters of A-Z a-z 0-9 _ -"))
        elif pb.name in names:
            violations.append(FieldViolation(field, f"{pb.name!r} is already a tool's name"))
        else:
            names.add(pb.name)
            try:
                parameters = struct_from_proto(pb.parameters, f"client_tools[{i}].parameters")
            except SchemaError as exc:
                violations.extend(exc.violations)
                continue
            out.append(external_tool(pb.name, pb.description, parameters or _NO_ARGUMENTS))
    if violations:
        raise SchemaError(violations, reason="INVALID_CLIENT_TOOLS")
    return out
