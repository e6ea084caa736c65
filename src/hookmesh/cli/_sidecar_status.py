"""The sidecar lines of `hookmesh status --sidecars`: the agent's own view of each sidecar
of its chain (AdminService.DescribeSidecars)."""

from __future__ import annotations

from typing import Any

_ROLES = {1: "live", 2: "candidate"}


def _line(status: Any) -> str:
    key = status.middleware_key or "(not described)"
    role = _ROLES.get(status.role, "?")
    described = f"described {status.description_hash[:12]}" if status.described else "not described"
    serving = "serving" if status.serving else "not serving"
    calls = f"{status.invocations} calls" if status.invocations else "never invoked"
    line = f"sidecar {key:16s} {status.target:22s} {role:9s} {described}  {serving}  {calls}"
    return line + (f"  last error: {status.last_error}" if status.last_error else "")


async def sidecar_lines(
    agent: str, timeout: float, token: str | None, tls: Any
) -> tuple[list[str], bool]:
    """The lines for the agent at `agent`, and whether every sidecar serves (an agent that
    does not tell is one line saying why, and not serving)."""
    from hookmesh.client import AdminClient, AgentClientError

    try:
        async with AdminClient(agent, timeout=timeout, token=token, tls=tls) as admin:
            sidecars = await admin.describe_sidecars()
    except AgentClientError as exc:
        why = "admin principals only" if exc.reason == "ADMIN_ONLY" else exc.code.name
        return [f"sidecars: the agent at {agent} does not tell ({why})"], False
    if not sidecars:
        return ["sidecars: none in the agent's chain"], True
    return [_line(s) for s in sidecars], all(s.serving for s in sidecars)
