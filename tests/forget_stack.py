"""The stack the erasure tests build (an agent with an A2A task store, memory and retrieval
services, and what each keeps), and counts of what a user has in it, asked of the databases
and folders themselves rather than through the API."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hookmesh.client import RetrievalClient
from hookmesh.memory import knowledge_base_of
from hookmesh.retrieval import Document
from hookmesh.services.agent import AgentService
from tests.agent_helpers import SHORT_TIMEOUT
from tests.session_backends import SessionBackend

TOKENS = "ops:ops-token\nalice:alice-token\nbob:bob-token\ncarol:carol-token\nagent:agent-token\n"


@dataclass
class Stack:
    """An agent service reaching an A2A task store and a memory service, and where each
    keeps its data."""

    agent: AgentService
    backend: SessionBackend
    a2a_url: str
    memory_db: Path
    memory_target: str
    retrieval_target: str = ""
    retrieval_url: str = ""
    retrieval_namespace: str = ""

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.agent.port}"


FILE_MODEL = {
    "type": "scripted",
    "per_reply": True,
    "turns": [
        {
            "tool_calls": [
                {
                    "name": "write_memory",
                    "arguments": {
                        "name": "diet",
                        "description": "what the user eats",
                        "type": "user",
                        "content": "vegetarian",
                    },
                },
                {"name": "long_report", "arguments": {}},
            ]
        },
        "done",
    ],
}


async def ingest(stack: Stack, token: str, base: str, docs: dict[str, str]) -> None:
    """The token's user ingests `docs` (id → text) into `base` (made when missing)."""
    async with RetrievalClient(stack.retrieval_target, timeout=SHORT_TIMEOUT, token=token) as kb:
        if base not in {k.name for k in await kb.list_knowledge_bases()}:
            await kb.create_knowledge_base(base)
        report = await kb.ingest(base, [Document(i, text) for i, text in docs.items()])
        assert not report.errors


async def count_sql(stack: Stack, url: str, sql: str, params: tuple[Any, ...]) -> int:
    """One count, asked of the database itself."""
    if url.startswith("sqlite:///"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
            return int(db.execute(sql.replace("%s", "?"), params).fetchone()[0])
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        row = await (await conn.execute(sql, params)).fetchone()  # type: ignore[arg-type]
        assert row is not None
        return int(row[0])


async def count_rows(stack: Stack, user: str, sessions: list[str]) -> dict[str, int]:
    """What the databases hold of `user` (whose sessions are `sessions`), per store."""
    b = stack.backend
    sqlite = b.name == "sqlite"
    names = ("sessions", "replies", "reply_events")
    tables = {n: f"agent_{n}" if sqlite else f"{b.namespace}.{n}" for n in names}
    counts = {
        f"agent.{name}": await count_sql(
            stack, b.url, f"SELECT count(*) FROM {table} WHERE owner = %s", (user,)
        )
        for name, table in tables.items()
    }
    marks = ", ".join("%s" for _ in sessions)
    counts["a2a.tasks"] = await count_sql(
        stack,
        stack.a2a_url,
        f"SELECT count(*) FROM tasks WHERE context_id IN ({marks})",
        tuple(sessions),
    )
    documents = (
        "documents" if stack.retrieval_url.startswith("sqlite") else
        f"{stack.retrieval_namespace}.documents"
    )  # fmt: skip
    counts["retrieval.documents"] = await count_sql(
        stack, stack.retrieval_url, f"SELECT count(*) FROM {documents} WHERE owner = %s", (user,)
    )
    with sqlite3.connect(stack.memory_db) as db:
        (counts["memory.memories"],) = db.execute(
            "SELECT count(*) FROM documents d JOIN knowledge_bases k ON d.kb_id = k.id"
            " WHERE k.name = ?",
            (knowledge_base_of(user),),
        ).fetchone()
    return counts


def files_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else []
