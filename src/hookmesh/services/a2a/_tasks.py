"""Where A2A tasks are kept: the SDK's database task store on SQLite (one process) or
PostgreSQL (replicas), so `tasks/get`, `tasks/list` and `tasks/subscribe` work on any replica,
also after the one that ran a task died; or in memory, lost with the process."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2a.server.tasks import InMemoryTaskStore, TaskStore

from hookmesh._files import private_file


@dataclass
class OpenTaskStore:
    """A task store and what closes it."""

    store: TaskStore
    engine: Any = None

    async def close(self) -> None:
        """Release the store's connections."""
        if self.engine is not None:
            await self.engine.dispose()


def _on_connect(connection: Any, _record: Any) -> None:
    cursor = connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.close()


async def open_task_store(url: str) -> OpenTaskStore:
    """Open the store `url` names and create its table if needed.

    Args:
        url: ``memory``, ``sqlite:///path`` or ``postgresql://...`` (a secret: never logged).

    Raises:
        ValueError: Another kind of URL.
        OSError: The database cannot be opened.
    """
    if url == "memory":
        return OpenTaskStore(InMemoryTaskStore())
    from a2a.server.tasks import DatabaseTaskStore
    from sqlalchemy import event
    from sqlalchemy.ext.asyncio import create_async_engine

    if url.startswith("sqlite:///"):
        private_file(Path(url.removeprefix("sqlite:///")))
        engine = create_async_engine("sqlite+aiosqlite:///" + url.removeprefix("sqlite:///"))
        event.listen(engine.sync_engine, "connect", _on_connect)
    elif url.startswith(("postgresql://", "postgres://")):
        rest = url.partition("://")[2]
        engine = create_async_engine(f"postgresql+psycopg://{rest}", pool_size=4)
    else:
        raise ValueError("the A2A task store is memory, sqlite:///path or postgresql://...")
    store = DatabaseTaskStore(engine)  # the SDK's table, `tasks`
    try:
        await store.initialize()
    except Exception as exc:
        await engine.dispose()
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise OSError(f"the A2A task store cannot be opened: {first}") from None
    return OpenTaskStore(store, engine)
