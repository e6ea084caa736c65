"""The sidecar lines of `hookmesh status --sidecars`: the agent's own view of each sidecar
of its chain (AdminService.DescribeSidecars)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def enum_word(enum: Any, value: int, prefix: str) -> str:
    """`value`'s name in the proto enum `enum`, without `prefix` and in lower case; its
    number when this client does not know it (a newer agent's value)."""
    try:
        return str(enum.Name(value)).removeprefix(prefix).lower()
    except ValueError:
        return str(value)


def sidecar_line(status: Any) -> str:
    """The line one sidecar prints."""
    from hookmesh.v1 import admin_pb2 as _admin_pb2

    key = status.middleware_key or "(not described)"
    role = enum_word(_admin_pb2.SidecarRole, status.role, "SIDECAR_ROLE_")
    described = f"described {status.description_hash[:12]}" if status.described else "not described"
    serving = "serving" if status.serving else "not serving"
    calls = f"{status.invocations} calls" if status.invocations else "never invoked"
    line = f"sidecar {key:16s} {status.target:22s} {role:9s} {described}  {serving}  {calls}"
    return line + (f"  last error: {status.last_error}" if status.last_error else "")


def all_serving(sidecars: Iterable[Any]) -> bool:
    """Whether every live sidecar (role ``live``) serves: a candidate's is shown, not
    judged (a shadow never affects a reply)."""
    from hookmesh.v1 import admin_pb2 as _admin_pb2

    return all(s.serving for s in sidecars if s.role == _admin_pb2.SIDECAR_ROLE_LIVE)


async def sidecar_lines(
    agent: str, timeout: float, token: str | None, tls: Any
) -> tuple[list[str], bool]:
    """The lines for the agent at `agent`, and whether every live sidecar serves
    (`all_serving`; an agent that does not tell is one line saying why, and not serving)."""
    from hookmesh.client import AdminClient, AgentClientError

    try:
        async with AdminClient(agent, timeout=timeout, token=token, tls=tls) as admin:
            sidecars = await admin.describe_sidecars()
    except AgentClientError as exc:
        why = "admin principals only" if exc.reason == "ADMIN_ONLY" else exc.code.name
        return [f"sidecars: the agent at {agent} does not tell ({why})"], False
    if not sidecars:
        return ["sidecars: none in the agent's chain"], True
    return [sidecar_line(s) for s in sidecars], all_serving(sidecars)
