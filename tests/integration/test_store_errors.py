"""Store failures as gRPC errors, from real SQLite and PostgreSQL errors: an outage is
UNAVAILABLE (retry later), anything else INTERNAL, judged by type and driver error code; the
agent service answers its session store's outage so and serves on once the store is back."""

from __future__ import annotations

import asyncio
import logging
import socket
import sqlite3
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import grpc
import psycopg
import pytest

from hookmesh.client import AgentClient, AgentClientError, text_of_events
from hookmesh.schema import AgentEvent, text_of
from hookmesh.server import store_error
from hookmesh.services.agent import load_config, start_agent_service
from tests.pg import postgres_url  # noqa: F401  (the session-wide PostgreSQL server)
from tests.service_tools import GateState
from tests.session_backends import SessionBackend

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


@asynccontextmanager
async def _outage(backend: SessionBackend, application: str) -> AsyncIterator[None]:
    """The session store fails while inside, for real: SQLite's file is locked by another
    writer (until it rolls back); PostgreSQL ends every connection the service opened (named
    `application`), as a failover does, and the service must connect again."""
    if backend.name == "sqlite":
        writer = sqlite3.connect(backend.url.removeprefix("sqlite:///"), isolation_level=None)
        writer.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            writer.execute("ROLLBACK")
            writer.close()
        return
    async with await psycopg.AsyncConnection.connect(backend.url, autocommit=True) as conn:
        cursor = await conn.execute(
            "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity"
            " WHERE application_name = %s",
            (application,),
        )
        ended = [row[0] for row in await cursor.fetchall()]
    assert ended and all(ended)  # each one gone, not only signalled
    yield


def _unavailable(error: AgentClientError) -> None:
    assert (error.code, error.reason) == (grpc.StatusCode.UNAVAILABLE, "STORE_UNAVAILABLE")
    assert error.message == "the session store is unavailable; retry later"


async def test_the_agent_service_answers_a_session_store_outage_unavailable_and_serves_on(
    session_backend: SessionBackend,
) -> None:
    GateState.reset()
    application = f"outage_{uuid.uuid4().hex[:8]}"
    store = session_backend.url
    if session_backend.name == "postgresql":
        store += f"?application_name={application}"
    config = load_config(
        None,
        **session_backend.config(store=store),
        tools=["tests.service_tools:gate"],
        models={
            "default": {
                "type": "scripted",
                "turns": [
                    "first",
                    {"tool_calls": [{"name": "gate", "arguments": {}}]},
                    "second",
                    "third",
                ],
            }
        },
    )
    service = await start_agent_service(config, address="127.0.0.1:0")
    try:
        async with AgentClient(f"127.0.0.1:{service.port}", timeout=SHORT_TIMEOUT) as client:
            assert await client.text("one", session_id="s1") == "first"

            async with _outage(session_backend, application):
                with pytest.raises(AgentClientError) as refused:
                    await client.delete_session("s1")
            _unavailable(refused.value)

            # The outage starts while the reply runs: its events stream, then persisting the
            # session at its end fails, and that ends the call (durability exit: saved only
            # at the end, so the turn is lost; tests/integration/test_durable_replies.py has
            # the step durability's outage, whose turn goes on).
            events: list[AgentEvent] = []
            reply = client.reply("two", session_id="s1", durability="exit")
            async with asyncio.timeout(SHORT_TIMEOUT):
                await GateState.started.wait()
                async with _outage(session_backend, application):
                    GateState.release.set()
                    with pytest.raises(AgentClientError) as lost:
                        async for event in reply:
                            events.append(event)
            _unavailable(lost.value)
            assert (events[0].type, events[-1].type) == ("reply_start", "reply_end")
            assert text_of_events(events) == "second"

            # The store is back: the session is not left busy, and only its lost turn is gone.
            assert await client.text("three", session_id="s1") == "third"
            session = await client.get_session("s1")
        assert [text_of(m) for m in session.context] == ["one", "first", "three", "third"]
    finally:
        await service.stop(None)
