"""`hookmesh memory ...` (a memory service's memories) and `hookmesh serve memory`."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer

from hookmesh.cli._app import TlsCaOption, TokenEnvOption, app, call_with

memory_app = typer.Typer(
    help="Read and write a memory service's long-term memories.", no_args_is_help=True
)
app.add_typer(memory_app, name="memory")

DEFAULT_TARGET = "127.0.0.1:7004"

User = Annotated[str, typer.Option("--user", "-u", help="The user whose memories these are.")]
Agent = Annotated[str, typer.Option("--agent", help="The agent (narrows reads; tags writes).")]
Session = Annotated[str, typer.Option("--session", help="The session (narrows reads).")]
Target = Annotated[str, typer.Option(help="Memory service address (host:port).")]
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON lines.")]
Timeout = Annotated[float, typer.Option(help="Seconds the call may take.")]


def _memory_json(memory: Any) -> dict[str, Any]:
    return {
        "id": memory.id,
        "text": memory.text,
        "user_id": memory.scope.user_id,
        "agent_id": memory.scope.agent_id,
        "session_id": memory.scope.session_id,
        "metadata": dict(memory.metadata),
        "origin": memory.origin,
        "create_time": memory.create_time.isoformat(),
        "update_time": memory.update_time.isoformat(),
        "source_message_ids": list(memory.source_message_ids),
    }


def _scope(user: str, agent: str = "", session: str = "") -> Any:
    from hookmesh.memory import MemoryScope

    return MemoryScope(user, agent or None, session or None)


def _metadata(pairs: list[str]) -> dict[str, Any] | None:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"{pair!r} is not key=value", param_hint="--meta")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out or None


@memory_app.command("add")
def add(
    facts: Annotated[list[str], typer.Argument(help="Facts to remember, each one argument.")],
    user: User,
    agent: Agent = "",
    session: Session = "",
    meta: Annotated[
        list[str] | None, typer.Option("--meta", help="Metadata key=value (repeatable).")
    ] = None,
    target: Target = DEFAULT_TARGET,
    as_json: AsJson = False,
    timeout: Timeout = 30.0,
    token_env: TokenEnvOption = None,
    tls_ca: TlsCaOption = None,
) -> None:
    """Remember FACTS (a near-duplicate of a memory is merged into it)."""
    from hookmesh.client import MemoryClient

    metadata = _metadata(meta or [])

    async def work(client: Any) -> int:
        result = await client.add(_scope(user, agent, session), facts=facts, metadata=metadata)
        for added in result.memories:
            if as_json:
                print(json.dumps({"outcome": added.outcome, **_memory_json(added.memory)}))
            else:
                print(f"{added.outcome:7s} {added.memory.id}  {added.memory.text}")
        return 0

    call_with(MemoryClient, target, timeout, token_env, tls_ca, work)


@memory_app.command("search")
def search(
    query: Annotated[str, typer.Argument(help="What to look for.")],
    user: User,
    agent: Agent = "",
    session: Session = "",
    top_k: Annotated[int, typer.Option(help="Most memories (1-50).")] = 5,
    threshold: Annotated[float, typer.Option(help="Cosine floor, -1 to 1; 0: none.")] = 0.0,
    target: Target = DEFAULT_TARGET,
    as_json: AsJson = False,
    timeout: Timeout = 30.0,
    token_env: TokenEnvOption = None,
    tls_ca: TlsCaOption = None,
) -> None:
    """Find the user's memories best matching QUERY (meaning and keywords, fused by rank)."""
    from hookmesh.client import MemoryClient

    async def work(client: Any) -> int:
        hits = await client.search(
            query, _scope(user, agent, session), top_k=top_k, score_threshold=threshold
        )
        for hit in hits:
            if as_json:
                row = {"rank": hit.rank, "score": hit.score, "similarity": hit.similarity}
                print(json.dumps({**row, **_memory_json(hit.memory)}))
            else:
                similarity = "  -  " if hit.similarity is None else f"{hit.similarity:.3f}"
                print(
                    f"{hit.rank:2d}. similarity {similarity}  score {hit.score:.4f}  "
                    f"{hit.memory.id}  {hit.memory.text}"
                )
        if not hits and not as_json:
            print("no memories match", file=sys.stderr)
        return 0

    call_with(MemoryClient, target, timeout, token_env, tls_ca, work)


@memory_app.command("list")
def list_memories(
    user: User,
    agent: Agent = "",
    session: Session = "",
    page_size: Annotated[int, typer.Option(help="Memories per page (1-500).")] = 50,
    page_token: Annotated[str, typer.Option(help="Continue from a printed next-page token.")] = "",
    every: Annotated[bool, typer.Option("--all", help="Follow every page.")] = False,
    target: Target = DEFAULT_TARGET,
    as_json: AsJson = False,
    timeout: Timeout = 30.0,
    token_env: TokenEnvOption = None,
    tls_ca: TlsCaOption = None,
) -> None:
    """List the user's memories, oldest first."""
    from hookmesh.client import MemoryClient

    async def work(client: Any) -> int:
        token = page_token
        while True:
            page = await client.list(
                _scope(user, agent, session), page_size=page_size, page_token=token
            )
            for memory in page.memories:
                if as_json:
                    print(json.dumps(_memory_json(memory)))
                else:
                    when = f"{memory.update_time:%Y-%m-%d %H:%M}"
                    print(f"{memory.id}  {when}  {memory.text}")
            token = page.next_page_token
            if not token:
                return 0
            if not every:
                print(f"next page: --page-token {token}", file=sys.stderr)
                return 0

    call_with(MemoryClient, target, timeout, token_env, tls_ca, work)


@memory_app.command("delete")
def delete(
    user: User,
    memory_ids: Annotated[
        list[str] | None, typer.Argument(help="Ids of the memories to delete.")
    ] = None,
    every: Annotated[
        bool, typer.Option("--all", help="Delete every memory of the user (and agent/session).")
    ] = False,
    agent: Agent = "",
    session: Session = "",
    target: Target = DEFAULT_TARGET,
    timeout: Timeout = 30.0,
    token_env: TokenEnvOption = None,
    tls_ca: TlsCaOption = None,
) -> None:
    """Delete memories by id, or with --all every memory of the scope."""
    from hookmesh.client import MemoryClient

    if bool(memory_ids) == every:
        raise typer.BadParameter("name memory ids, or pass --all (not both)")

    async def work(client: Any) -> int:
        if every:
            count = await client.delete_all(_scope(user, agent, session))
            print(f"deleted {count} memories")
            return 0
        for memory_id in memory_ids or []:
            await client.delete(user, memory_id)
            print(f"deleted {memory_id}")
        return 0

    call_with(MemoryClient, target, timeout, token_env, tls_ca, work)
