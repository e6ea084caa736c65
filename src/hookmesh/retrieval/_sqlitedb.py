"""A SQLite file for asyncio code: WAL, a commit fsync'd before it returns, every call in a
worker thread."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import sqlite3
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from hookmesh._files import private_file

T = TypeVar("T")


def fts5_available() -> bool:
    """Whether this Python's sqlite3 was built with FTS5 (the stdlib one here is)."""
    db = sqlite3.connect(":memory:")
    try:
        db.execute("CREATE VIRTUAL TABLE probe USING fts5(text)")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        db.close()


class SqliteDatabase:
    """One SQLite file shared by the tasks of one process (reusable by any store).

    - Journal: WAL, so readers run beside the writer. When `transaction` returns, its
      commit is in the WAL file, so a process crash (``kill -9``) right after loses nothing;
      ``synchronous=FULL`` on every connection makes SQLite fsync the WAL at each commit,
      so it also survives an OS crash or power loss (on a disk that honours fsync).
    - Threads: `run` executes a function in a private pool; each pool thread has its own
      connection, so the event loop never waits on SQLite. Writes are serialised by a lock
      (no ``SQLITE_BUSY`` between our own threads; other processes wait up to 30 s).

    Args:
        path: The database file; parent directories are created.
        threads: Worker threads (and so connections).
    """

    def __init__(self, path: str | Path, *, threads: int = 4) -> None:
        self.path = Path(path)
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="hookmesh-sqlite")
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._guard = threading.Lock()
        self._write_lock = threading.Lock()
        self.closed = False

    def connection(self) -> sqlite3.Connection:
        """This worker thread's connection (autocommit mode; use `transaction` to write)."""
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            private_file(self.path)
            db = sqlite3.connect(
                self.path, check_same_thread=False, isolation_level=None, timeout=30.0
            )
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            self._local.db = db
            with self._guard:
                self._connections.append(db)
        return db

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on error), one writer at a time.
        Call from a worker thread (inside `run`)."""
        db = self.connection()
        with self._write_lock:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in a worker thread.

        Raises:
            RuntimeError: The database is closed.
        """
        if self.closed:
            raise RuntimeError("the knowledge store is closed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args))

    async def close(self) -> None:
        """Wait for running calls, then close every connection."""
        if self.closed:
            return
        self.closed = True
        await asyncio.to_thread(self._pool.shutdown, wait=True)
        with self._guard:
            for db in self._connections:
                db.close()
            self._connections.clear()
