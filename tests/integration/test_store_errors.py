"""Store failures as gRPC errors, from real SQLite and PostgreSQL errors: an outage is
UNAVAILABLE (retry later), anything else INTERNAL, judged by type and driver error code."""

from __future__ import annotations

import asyncio
import logging
import socket
import sqlite3
from pathlib import Path

import grpc
import psycopg
import pytest

from hookmesh.server import store_error
from tests.pg import postgres_url  # noqa: F401  (the session-wide PostgreSQL server)

pytestmark = pytest.mark.timeout(60)

SHORT_TIMEOUT = 30.0
log = logging.getLogger("tests.store_errors")


def _raised(path: Path, *statements: str) -> sqlite3.Error:
    """What SQLite raises for the last statement, run on a second connection after the
    others ran on the first (which may hold a lock)."""
    holder = sqlite3.connect(path, isolation_level=None)
    other = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        for statement in statements[:-1]:
            holder.execute(statement)
        with pytest.raises(sqlite3.Error) as caught:
            other.execute(statements[-1])
        return caught.value
    finally:
        other.close()
        holder.close()


def _code(exc: Exception) -> tuple[grpc.StatusCode, str]:
    error = store_error(exc, "test store", log)
    return error.code, error.reason


def test_sqlite_busy_and_unopenable_files_are_outages_a_missing_table_is_not(
    tmp_path: Path,
) -> None:
    db = tmp_path / "store.db"
    locked = _raised(db, "CREATE TABLE t (x)", "BEGIN EXCLUSIVE", "INSERT INTO t VALUES (1)")
    assert "locked" in str(locked)
    assert _code(locked) == (grpc.StatusCode.UNAVAILABLE, "STORE_UNAVAILABLE")
    with pytest.raises(sqlite3.Error) as unopenable:
        sqlite3.connect(tmp_path / "no" / "such" / "dir.db")
    assert _code(unopenable.value) == (grpc.StatusCode.UNAVAILABLE, "STORE_UNAVAILABLE")
    missing = _raised(db, "SELECT * FROM nowhere")
    assert isinstance(missing, sqlite3.OperationalError) and "no such table" in str(missing)
    assert _code(missing) == (grpc.StatusCode.INTERNAL, "INTERNAL")
    error = store_error(missing, "test store", log)
    assert "nowhere" not in error.message  # no internals in what the client sees


async def test_postgresql_outages_by_sqlstate_and_a_missing_table_is_not_one(
    postgres_url: str,  # noqa: F811
) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        closed = f"postgresql://nobody@127.0.0.1:{sock.getsockname()[1]}/db"
    async with asyncio.timeout(SHORT_TIMEOUT):
        with pytest.raises(psycopg.OperationalError) as refused:
            await psycopg.AsyncConnection.connect(closed, connect_timeout=5)
        assert refused.value.sqlstate is None
        assert _code(refused.value) == (grpc.StatusCode.UNAVAILABLE, "STORE_UNAVAILABLE")

        async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
            with pytest.raises(psycopg.Error) as missing:
                await conn.execute("SELECT * FROM nowhere")
            assert missing.value.sqlstate == "42P01"
            assert _code(missing.value) == (grpc.StatusCode.INTERNAL, "INTERNAL")
            with pytest.raises(psycopg.Error) as shutdown:
                await conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")
            assert shutdown.value.sqlstate == "57P01"  # admin shutdown: the server went away
            assert _code(shutdown.value) == (grpc.StatusCode.UNAVAILABLE, "STORE_UNAVAILABLE")


def test_connection_errors_are_outages_and_bugs_are_internal() -> None:
    assert _code(ConnectionResetError("peer went away")) == (
        grpc.StatusCode.UNAVAILABLE,
        "STORE_UNAVAILABLE",
    )
    assert _code(KeyError("a bug")) == (grpc.StatusCode.INTERNAL, "INTERNAL")
