"""`hookmesh sessions list|show|delete`: an agent service's sessions."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer

from hookmesh.cli._app import TlsCaOption, TokenEnvOption, app, call_with

sessions_app = typer.Typer(help="List, read and delete an agent service's sessions.")
app.add_typer(sessions_app, name="sessions", no_args_is_help=True)

Target = Annotated[str, typer.Option(help="Agent service address.")]
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON lines.")]
Timeout = Annotated[float, typer.Option(help="Seconds the call may take.")]
DEFAULT_TARGET = "127.0.0.1:7000"


def _summary(info: Any) -> dict[str, Any]:
    return {
        "session_id": info.session_id,
        "agent_name": info.agent_name,
        "status": info.status,
        "create_time": info.create_time.isoformat(),
        "update_time": info.update_time.isoformat(),
        "pending_calls": [c.name for c in info.pending_calls],
    }


@sessions_app.command("list")
def list_sessions(
    page_size: Annotated[int, typer.Option(help="Sessions per page (1-1000).")] = 50,
    every: Annotated[bool, typer.Option("--all", help="Follow every page.")] = False,
    target: Target = DEFAULT_TARGET,
    as_json: AsJson = False,
    timeout: Timeout = 30.0,
    token_env: TokenEnvOption = None,
    tls_ca: TlsCaOption = None,
) -> None:
    """List sessions, most recently updated first."""
    from hookmesh.client import AgentClient

    async def work(client: Any) -> int:
        token = ""
        shown = 0
        while True:
            page, token = await client.list_sessions(page_size=page_size, page_token=token)
            for info in page:
                shown += 1
                if as_json:
                    print(json.dumps(_summary(info)))
                else:
                    when = f"{info.update_time:%Y-%m-%d %H:%M:%S}"
                    print(f"{info.session_id}  {when}  {info.status}")
            if not token or not every:
                break
        if not shown and not as_json:
            print("no sessions", file=sys.stderr)
        return 0

    call_with(AgentClient, target, timeout, token_env, tls_ca, work)


@sessions_app.command("show")
def show(
    session_id: Annotated[str, typer.Argument(help="The session.")],
    target: Target = DEFAULT_TARGET,
    as_json: AsJson = False,
    timeout: Timeout = 30.0,
    token_env: TokenEnvOption = None,
    tls_ca: TlsCaOption = None,
) -> None:
    """Print a session's conversation."""
    from hookmesh.client import AgentClient
    from hookmesh.schema import text_of, tool_calls, tool_results

    async def work(client: Any) -> int:
        info = await client.get_session(session_id)
        if as_json:
            context = [m.model_dump(mode="json", exclude_none=True) for m in info.context]
            print(json.dumps({**_summary(info), "context": context}))
            return 0
        print(f"session {info.session_id} ({info.status}, agent {info.agent_name})")
        for msg in info.context:
            role = getattr(msg, "role", "")
            for call in tool_calls(msg):
                print(f"  {role:9s} → {call.name} {call.arguments}")
            for result in tool_results(msg):
                print(f"  {'tool':9s} ← {result.name} {result.state}: {result.text}")
            text = text_of(msg)
            if text:
                print(f"  {role:9s} {text}")
        return 0

    call_with(AgentClient, target, timeout, token_env, tls_ca, work)


@sessions_app.command("delete")
def delete(
    session_ids: Annotated[list[str], typer.Argument(help="The sessions to delete.")],
    target: Target = DEFAULT_TARGET,
    timeout: Timeout = 30.0,
    token_env: TokenEnvOption = None,
    tls_ca: TlsCaOption = None,
) -> None:
    """Delete sessions that are not replying."""
    from hookmesh.client import AgentClient

    async def work(client: Any) -> int:
        for session_id in session_ids:
            await client.delete_session(session_id)
            print(f"deleted {session_id}")
        return 0

    call_with(AgentClient, target, timeout, token_env, tls_ca, work)
