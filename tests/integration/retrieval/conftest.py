"""Fixtures for the retrieval store suite: every test runs on SQLite and on PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hookmesh.retrieval import Embedder, KnowledgeStore, open_knowledge_store
from tests.pg import postgres_url  # noqa: F401  (the session-wide PostgreSQL server)


@dataclass
class Backend:
    """Where a test's stores live; `open` opens another store on the same data."""

    name: str
    url: str
    open: Callable[..., Awaitable[KnowledgeStore]]


@pytest.fixture(params=["sqlite", "postgresql"])
async def backend(
    request: pytest.FixtureRequest, tmp_path: Path, embedder: Embedder
) -> AsyncIterator[Backend]:
    """An empty SQLite file, or a fresh schema in the session's PostgreSQL server."""
    options: dict[str, Any] = {}
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/knowledge.db"
    else:
        url = request.getfixturevalue("postgres_url")
        options["namespace"] = f"t_{uuid.uuid4().hex[:16]}"
    opened: list[KnowledgeStore] = []

    async def open_store(with_embedder: Embedder | None = None, **extra: Any) -> KnowledgeStore:
        store = await open_knowledge_store(url, with_embedder or embedder, **options, **extra)
        opened.append(store)
        return store

    try:
        yield Backend(request.param, url, open_store)
    finally:
        for store in opened:
            await store.close()
        if "namespace" in options:
            import psycopg

            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                await conn.execute(f"DROP SCHEMA {options['namespace']} CASCADE")


@pytest.fixture
async def store(backend: Backend) -> KnowledgeStore:
    """A store on the test's backend (closed by `backend`)."""
    return await backend.open()
