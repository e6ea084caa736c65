"""Sessions in PostgreSQL, shared by agent replicas, with a fenced lease per reply."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import secrets
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from typing import Any

from hookmesh.services.agent._store import (
    JOURNAL_EVENT,
    JOURNAL_REPLY,
    UPSERT_SET,
    Dialect,
    JournalStep,
    Lease,
    LeaseLostError,
    Params,
    Rows,
    SessionRow,
    SessionStore,
    StoredSession,
)

log = logging.getLogger("hookmesh.agent_service")

_NAMESPACE = re.compile(r"[a-z_][a-z0-9_]{0,62}")
# NOTE(sessions): one lock id for the schema migration, so replicas starting together do not
# race on CREATE ... IF NOT EXISTS.
_MIGRATION_LOCK = 0x686D6173  # "hmas"

_SCHEMA = """
CREATE SCHEMA IF NOT EXISTS {ns};
CREATE TABLE IF NOT EXISTS {ns}.sessions (
    owner        text NOT NULL,
    session_id   text NOT NULL,
    agent_name   text NOT NULL,
    awaiting     text NOT NULL DEFAULT '',
    pending_json text NOT NULL DEFAULT '[]',
    state_json   text NOT NULL,
    create_time  timestamptz NOT NULL DEFAULT now(),
    update_time  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (owner, session_id)
);
CREATE INDEX IF NOT EXISTS sessions_by_update
    ON {ns}.sessions (owner, update_time DESC, session_id DESC);
CREATE INDEX IF NOT EXISTS sessions_by_age ON {ns}.sessions (update_time);
CREATE SEQUENCE IF NOT EXISTS {ns}.lease_tokens;
CREATE TABLE IF NOT EXISTS {ns}.session_leases (
    owner       text NOT NULL,
    session_id  text NOT NULL,
    holder      bigint NOT NULL,
    token       bigint NOT NULL,
    expire_time timestamptz NOT NULL,
    PRIMARY KEY (owner, session_id)
);
CREATE INDEX IF NOT EXISTS session_leases_by_holder ON {ns}.session_leases (holder);
CREATE TABLE IF NOT EXISTS {ns}.replies (
    owner       text NOT NULL,
    session_id  text NOT NULL,
    reply_id    text NOT NULL,
    status      text NOT NULL,
    last_seq    bigint NOT NULL,
    step_seq    bigint NOT NULL,
    durability  text NOT NULL,
    request     bytea NOT NULL,
    update_time timestamptz NOT NULL,
    PRIMARY KEY (owner, session_id, reply_id)
);
CREATE INDEX IF NOT EXISTS replies_by_status ON {ns}.replies (status, update_time);
CREATE TABLE IF NOT EXISTS {ns}.reply_events (
    owner      text NOT NULL,
    session_id text NOT NULL,
    reply_id   text NOT NULL,
    seq        bigint NOT NULL,
    event      bytea NOT NULL,
    PRIMARY KEY (owner, session_id, reply_id, seq)
);
"""

# A lease is free when it expired, or when its holder's advisory lock is not held: a holder
# keeps that lock on its own connection for its whole life, so a replica that dies (its
# connection closes) frees its leases at once, and one that hangs frees them on expiry.
_ACQUIRE = """
INSERT INTO {ns}.session_leases AS l (owner, session_id, holder, token, expire_time)
VALUES (%(owner)s, %(sid)s, %(holder)s, nextval('{ns}.lease_tokens'),
        now() + make_interval(secs => %(ttl)s))
ON CONFLICT (owner, session_id) DO UPDATE
    SET holder = excluded.holder, token = excluded.token, expire_time = excluded.expire_time
    WHERE l.expire_time < now() OR pg_try_advisory_xact_lock(l.holder)
RETURNING token
"""
# Tells the live holder of a session's lease, if another replica, to interrupt its reply: a
# NOTIFY on the namespace's channel naming that holder, which alone acts on it.
_SIGNAL_INTERRUPT = """
SELECT pg_notify(%(channel)s, json_build_array(l.holder, l.owner, l.session_id)::text)
FROM {ns}.session_leases l
WHERE l.owner = %(owner)s AND l.session_id = %(sid)s AND l.holder <> %(holder)s
  AND l.expire_time >= now() AND NOT pg_try_advisory_xact_lock(l.holder)
"""
_LIVE_LEASE = (
    "EXISTS (SELECT 1 FROM {ns}.session_leases l WHERE l.owner = s.owner"
    " AND l.session_id = s.session_id AND l.expire_time >= now())"
)
# A reply's session is held while its lease has not expired and its holder lives (keeps its
# advisory lock): otherwise the reply, if still running, is an orphan another replica adopts.
_HELD = (
    "EXISTS (SELECT 1 FROM {ns}.session_leases l WHERE l.owner = r.owner"
    " AND l.session_id = r.session_id AND l.expire_time >= now()"
    " AND NOT pg_try_advisory_xact_lock(l.holder))"
)
# NOTE(sessions): a write's fence is an error, not a row to read: it aborts the transaction
# by itself, so COMMIT goes in the same pipeline and a write is one round trip. The row lock
# keeps a taker waiting until the write commits. Created with the schema when missing (a
# function body has semicolons of its own, so it is not part of `_SCHEMA`'s split): replacing
# it on every start would need every replica's role to own it.
_LEASE_LOST = "HMLST"
"""SQLSTATE the fence raises when the write's lease is no longer held."""
_FENCE_FUNCTION = """
DO $create$
BEGIN
    IF to_regprocedure('{ns}.fence(text,text,bigint)') IS NULL THEN
        CREATE FUNCTION {ns}.fence(o text, s text, t bigint) RETURNS void
        LANGUAGE plpgsql AS $fence$
        BEGIN
            PERFORM 1 FROM {ns}.session_leases
                WHERE owner = o AND session_id = s AND token = t FOR UPDATE;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'lease lost' USING ERRCODE = 'HMLST';
            END IF;
        END
        $fence$;
    END IF;
END
$create$
"""
_FENCE = "SELECT {ns}.fence(%s, %s, %s)"
_UPSERT = (
    "INSERT INTO {ns}.sessions (owner, session_id, agent_name, awaiting, pending_json,"
    " state_json) VALUES (%s, %s, %s, %s, %s, %s)"
    f" ON CONFLICT (owner, session_id) DO UPDATE SET {UPSERT_SET},"
    " update_time = clock_timestamp()"
)


class PostgresSessionStore(SessionStore):
    """Sessions in PostgreSQL (psycopg 3 async pool), for agent replicas behind a proxy.

    Each reply holds a lease on its session (`acquire`): a row with an expiry and a fencing
    token. Another replica gets None from `acquire` until the lease is released, expires
    (`lease_seconds` after the last `renew`), or its holder's connection closes (the holder
    process died). A write carrying a lease that was taken over is refused
    (`LeaseLostError`), so a replica that hung past its expiry cannot overwrite what the
    new holder wrote. Tables live in schema `namespace`; every replica of one agent service
    must use the same one.

    Args:
        url: ``postgresql://user:password@host:port/database`` (a secret: never logged).
        namespace: The schema holding the tables.
        lease_seconds: How long a lease lasts without renewal.
        max_connections: Pool ceiling.
        connect_timeout: Seconds to wait for a connection.
    """

    def __init__(
        self,
        url: str,
        *,
        namespace: str = "agent",
        lease_seconds: float = 30.0,
        max_connections: int = 10,
        connect_timeout: float = 10.0,
    ) -> None:
        if not _NAMESPACE.fullmatch(namespace):
            raise ValueError("namespace is 1-63 characters of a-z, 0-9 and '_'")
        super().__init__(
            Dialect(
                table=f"{namespace}.sessions",
                mark="%s",
                time="%s::timestamptz",
                rest="OFFSET %s",
                leased=_LIVE_LEASE.replace("{ns}", namespace),
                replies=f"{namespace}.replies",
                events=f"{namespace}.reply_events",
                held=_HELD.replace("{ns}", namespace),
            )
        )
        self.namespace = namespace
        self.lease_seconds = lease_seconds
        self._url = url
        self._max = max_connections
        self._connect_timeout = connect_timeout
        self.holder = secrets.randbits(62) + 1
        """This store's holder id: the key of the advisory lock it keeps while it lives."""
        self._held: dict[tuple[str, str], int] = {}
        self._fresh: dict[tuple[str, str], Rows] = {}
        """The session as read with its lease, until the holder's first `get` or write."""
        self._pool: Any = None
        self._lock_conn: Any = None
        self._listen_conn: Any = None
        self._channel = f"hookmesh_interrupt_{namespace}"
        """The NOTIFY channel replicas of this namespace ask each other to interrupt on."""
        self.commits_channel = f"hookmesh_commits_{namespace}"
        """The NOTIFY channel each journal step is announced on (a watcher on another
        replica reads the new events when its reply's step comes)."""

    @classmethod
    async def open(cls, url: str, **options: Any) -> PostgresSessionStore:
        """Connect, create the schema if needed, take the holder lock and open the pool.

        Raises:
            psycopg.OperationalError: The server cannot be reached.
        """
        from psycopg_pool import AsyncConnectionPool

        store = cls(url, **options)
        try:
            await store._migrate()
            await store._hold()
            await store._listen()
            store._pool = AsyncConnectionPool(
                url, min_size=1, max_size=store._max, kwargs={"autocommit": True}, open=False
            )
            await store._pool.open(wait=True, timeout=store._connect_timeout)
        except BaseException:
            await store.close()
            raise
        return store

    @property
    def leases(self) -> PostgresSessionStore:
        """This store: it implements `SessionLeases`."""
        return self

    async def _connect(self) -> Any:
        import psycopg

        return await psycopg.AsyncConnection.connect(
            self._url, autocommit=True, connect_timeout=max(1, int(self._connect_timeout))
        )

    async def _migrate(self) -> None:
        async with await self._connect() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            for statement in _SCHEMA.format(ns=self.namespace).split(";"):
                if statement.strip():
                    await conn.execute(statement)  # type: ignore[arg-type]
            await conn.execute(_FENCE_FUNCTION.format(ns=self.namespace))  # type: ignore[arg-type]

    async def _hold(self) -> None:
        """Take this holder's advisory lock on a connection of its own (kept until close).

        Raises:
            RuntimeError: Another session has the lock: the server has not yet ended this
                holder's previous connection (the next renewal tries again).
        """
        conn = await self._connect()
        try:
            # NOTE(sessions): never waits: a holder id is random, so only this holder's own
            # broken connection can have it, and waiting for the server to notice that one
            # would stall the renewals.
            cursor = await conn.execute("SELECT pg_try_advisory_lock(%s)", (self.holder,))
            [(taken,)] = await cursor.fetchall()
            if not taken:
                raise RuntimeError("the holder lock is still held by a connection that broke")
        except BaseException:
            with contextlib.suppress(Exception):
                await conn.close()
            raise
        self._lock_conn = conn

    async def _holding(self) -> bool:
        """Whether the holder connection still answers: one the server ended (a restart, an
        idle timeout, pg_terminate_backend) looks open until it is used, and its lock is gone."""
        import psycopg

        conn = self._lock_conn
        if conn is None or conn.closed:
            return False
        probe = asyncio.ensure_future(conn.execute("SELECT 1"))
        try:
            await asyncio.shield(probe)
        except psycopg.OperationalError:
            with contextlib.suppress(Exception):
                await conn.close()
            return False
        except BaseException:
            # NOTE(sessions): cut off mid-query (the renewal's bound): psycopg, cancelled,
            # would first spend up to 10 s asking the server to cancel the query, well past
            # a short lease. The connection's state is unknown anyway: it is closed at once
            # (the next renewal makes a new one), and the probe, cancelled, finds it closed.
            with contextlib.suppress(Exception):
                await conn.close()
            probe.cancel()
            probe.add_done_callback(_retrieve)
            raise
        return True

    def _ns(self, sql: str) -> Any:
        """`sql` with ``{ns}`` naming this store's schema."""
        return sql.replace("{ns}", self.namespace)

    def _connection(self) -> Any:
        """A pooled connection, as an async context manager."""
        if self._pool is None:
            raise RuntimeError("the session store is closed")
        return self._pool.connection()

    async def _execute(self, sql: str, params: Params) -> Rows:
        async with self._connection() as conn:
            cursor = await conn.execute(sql, params)
            return list(await cursor.fetchall()) if cursor.description else []

    async def _execute_many(self, sql: str, params: Sequence[Sequence[Any]]) -> None:
        async with self._connection() as conn, conn.cursor() as cursor:
            await cursor.executemany(sql, params)

    async def _execute_batch(self, statements: Sequence[tuple[str, Params]]) -> tuple[Rows, ...]:
        # NOTE(sessions): pipelined, one sync at the block's end: one round trip, and the
        # statements share its implicit transaction (an error skips the rest).
        async with self._connection() as conn:
            async with conn.pipeline():
                cursors = [await conn.execute(sql, params) for sql, params in statements]
            return tuple([list(await c.fetchall()) if c.description else [] for c in cursors])

    # --- leases ----------------------------------------------------------------------------

    async def acquire(self, owner: str, session_id: str) -> Lease | None:
        # NOTE(sessions): the session is read in the same round trip, after the lease is
        # taken (one implicit transaction, each statement its own snapshot): a reply reads
        # its session right after claiming it, and that read is then answered from here.
        # Kept only until the holder's first `get`, its first write or its release.
        params = {"owner": owner, "sid": session_id, "holder": self.holder}
        rows, session = await self._batch(
            [
                (self._ns(_ACQUIRE), {**params, "ttl": self.lease_seconds}),
                self._read(owner, session_id),
            ]
        )
        if not rows:
            return None
        token = int(rows[0][0])
        self._held[owner, session_id] = token
        self._fresh[owner, session_id] = session
        return Lease(owner, session_id, token)

    async def get(self, owner: str, session_id: str) -> StoredSession | None:
        """`SessionStore.get`; the first after `acquire` is the read made with the lease."""
        fresh = self._fresh.pop((owner, session_id), None)
        if fresh is None:
            return await super().get(owner, session_id)
        return self._session(owner, session_id, fresh)

    async def delete(self, owner: str, session_id: str) -> bool:
        """`SessionStore.delete`; the session read with its lease goes too."""
        self._fresh.pop((owner, session_id), None)
        return await super().delete(owner, session_id)

    async def forget(self, owner: str) -> tuple[tuple[str, int], ...]:
        """`SessionStore.forget`; the sessions read with their leases go too."""
        for key in [key for key in self._fresh if key[0] == owner]:
            del self._fresh[key]
        return await super().forget(owner)

    async def renew(self) -> list[Lease]:
        """Extend every lease this store holds; retake the holder lock if its connection
        broke (leases taken over meanwhile are reported lost).

        Raises:
            RuntimeError: The store is closed (it must not take the holder lock again), or
                the holder lock could not be retaken yet.
            TimeoutError: The holder connection did not answer within a third of a lease.
        """
        if self._pool is None:
            raise RuntimeError("the session store is closed")
        # NOTE(sessions): bounded, so a holder connection that hangs (half-open) fails this
        # round instead of stalling every later one; its caller retries the next round.
        async with asyncio.timeout(self.lease_seconds / 3):
            if not await self._holding():
                log.warning("the session store's holder connection broke: reconnecting")
                await self._hold()
                if self._pool is None:  # closed while reconnecting: give the lock up again
                    conn, self._lock_conn = self._lock_conn, None
                    await conn.close()
                    raise RuntimeError("the session store is closed")
        # NOTE(sessions): only the leases held before the renewal is sent are judged: one
        # granted while it runs may commit after its snapshot and would look lost. Only
        # their tokens are renewed: a row of this holder it no longer knows (a release whose
        # delete failed, an acquire whose reply was lost) must expire.
        held = dict(self._held)
        if not held:
            return []
        rows = await self._rows(
            self._ns(
                "UPDATE {ns}.session_leases SET expire_time = now() + make_interval(secs => %s)"
                " WHERE holder = %s AND token = ANY(%s) RETURNING owner, session_id, token"
            ),
            (self.lease_seconds, self.holder, list(held.values())),
        )
        kept = {(o, s, int(t)) for o, s, t in rows}
        # NOTE(sessions): a lease released while the renewal ran is gone from the table
        # without having been lost (nor is a lease taken again meanwhile, with a new token).
        lost = [
            Lease(o, s, t)
            for (o, s), t in held.items()
            if (o, s, t) not in kept and self._held.get((o, s)) == t
        ]
        for lease in lost:
            del self._held[lease.owner, lease.session_id]
            self._fresh.pop((lease.owner, lease.session_id), None)
        return lost

    async def release(self, lease: Lease) -> None:
        self._fresh.pop((lease.owner, lease.session_id), None)
        if self._held.get((lease.owner, lease.session_id)) == lease.token:
            del self._held[lease.owner, lease.session_id]
        await self._rows(
            self._ns(
                "DELETE FROM {ns}.session_leases"
                " WHERE owner = %s AND session_id = %s AND token = %s"
            ),
            (lease.owner, lease.session_id, lease.token),
        )

    async def signal_interrupt(self, owner: str, session_id: str) -> bool:
        params = {"channel": self._channel, "owner": owner, "sid": session_id}
        return bool(
            await self._rows(self._ns(_SIGNAL_INTERRUPT), {**params, "holder": self.holder})
        )

    async def _listen(self) -> None:
        """LISTEN on a connection of its own (waiting for notifications holds it); from
        here on, interrupts asked of this replica queue up until `interrupt_requests`."""
        conn = await self._connect()
        await conn.execute(f"LISTEN {self._channel}")  # type: ignore[arg-type]
        self._listen_conn = conn

    async def interrupt_requests(self) -> AsyncIterator[tuple[str, str]]:
        if self._listen_conn is None or self._listen_conn.closed:
            await self._listen()
        async for note in self._listen_conn.notifies():
            holder, owner, session_id = json.loads(note.payload)
            if holder == self.holder:
                yield owner, session_id

    # --- sessions --------------------------------------------------------------------------

    async def sweep(
        self,
        *,
        older_than: datetime | None,
        keep: int | None,
        busy: set[tuple[str, str]],
        journal_before: datetime | None = None,
    ) -> int:
        """`SessionStore.sweep`, then drop the expired leases (their holders hung or died)."""
        gone = await super().sweep(
            older_than=older_than, keep=keep, busy=busy, journal_before=journal_before
        )
        await self._rows(self._ns("DELETE FROM {ns}.session_leases WHERE expire_time < now()"))
        return gone

    async def _write(self, row: SessionRow, lease: Lease | None, step: JournalStep | None) -> None:
        # NOTE(sessions): one transaction in one round trip: BEGIN, the fence, the statements
        # and COMMIT are pipelined and sent together with one sync, when the pipeline block
        # ends (psycopg's transaction() would sync around BEGIN and COMMIT, and an explicit
        # sync before the block's end costs a round trip more). A fence that fails raises
        # `_LEASE_LOST` inside the transaction, so the server skips what follows it up to the
        # sync, COMMIT included, and nothing of the write is kept.
        import psycopg

        self._fresh.pop((row[0], row[1]), None)
        async with self._connection() as conn:
            try:
                async with conn.pipeline():
                    await conn.execute("BEGIN")
                    if lease is not None:
                        await conn.execute(self._ns(_FENCE), (row[0], row[1], lease.token))
                    await conn.execute(self._ns(_UPSERT), row)
                    if step is not None:
                        reply, events = self.journal_params(row[0], row[1], step)
                        await conn.execute(self._sql(JOURNAL_REPLY, now="clock_timestamp()"), reply)
                        if events:
                            async with conn.cursor() as cursor:
                                await cursor.executemany(self._sql(JOURNAL_EVENT), events)
                        await conn.execute(
                            "SELECT pg_notify(%s, %s)",
                            (self.commits_channel, json.dumps(reply[:5])),
                        )
                    await conn.execute("COMMIT")
            except BaseException as exc:
                # A connection in a bad state cannot roll back: the pool discards it, and the
                # error that got us here is the one to raise.
                with contextlib.suppress(Exception):
                    await conn.execute("ROLLBACK")
                if isinstance(exc, psycopg.Error) and exc.sqlstate == _LEASE_LOST:
                    raise LeaseLostError(
                        f"session {row[1]} was taken over by another replica"
                    ) from None
                raise

    async def close(self) -> None:
        """Close the pool, the holder connection (leases still held become free) and the
        interrupt listener."""
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()
        conns, self._lock_conn, self._listen_conn = (self._lock_conn, self._listen_conn), None, None
        for conn in conns:
            if conn is not None:
                await conn.close()


def _retrieve(task: asyncio.Future[Any]) -> None:
    """Read an abandoned probe's outcome, so asyncio does not log it as never retrieved."""
    if not task.cancelled():
        task.exception()
