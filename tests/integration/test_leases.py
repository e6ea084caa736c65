"""Session leases beyond their happy path, on real PostgreSQL: a stale holder's release after a
takeover, retention by count and by age against leased sessions, and a reply that runs
longer than its lease (renewed, so the other replica stays out throughout).

test_session_store.py has the lease basics (busy, expiry, a dead holder, fencing)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import grpc
import pytest

from hookmesh.agent import AgentState
from hookmesh.client import AgentClient, AgentClientError
from hookmesh.schema import text_of
from hookmesh.services.agent import (
    AgentService,
    PostgresSessionStore,
    load_config,
    start_agent_service,
)
from hookmesh.services.agent._store import JournalStep, Lease, LeaseLostError
from tests.agent_helpers import SHORT_TIMEOUT
from tests.mesh_app import PARK, Gate
from tests.service_tools import GateState
from tests.session_backends import SessionBackend

pytestmark = pytest.mark.timeout(60)

Replicas = tuple[PostgresSessionStore, PostgresSessionStore, PostgresSessionStore]


@pytest.fixture
async def replicas(postgres_backend: SessionBackend) -> AsyncIterator[Replicas]:
    """Three stores on one schema, as three agent replicas have (30 s leases: only the test
    expires them)."""
    stores = [await postgres_backend.open() for _ in range(3)]
    assert all(isinstance(s, PostgresSessionStore) for s in stores)
    try:
        yield stores[0], stores[1], stores[2]  # type: ignore[return-value]
    finally:
        for store in stores:
            await store.close()


async def test_a_stale_holders_release_leaves_the_new_lease_in_place(
    replicas: Replicas, postgres_backend: SessionBackend
) -> None:
    first, second, third = replicas
    stale = await first.acquire("alice", "s")
    assert stale is not None
    await postgres_backend.expire_leases()  # the first holder hung past its lease
    fresh = await second.acquire("alice", "s")
    assert fresh is not None
    await first.release(stale)  # it wakes up and gives up what it no longer holds
    assert await third.acquire("alice", "s") is None  # the new holder still keeps it
    assert await second.renew() == []
    await second.put("alice", "s", "agent", AgentState(), lease=fresh)  # and may still write


async def test_retention_by_count_spares_a_session_another_replica_holds(
    replicas: Replicas, postgres_backend: SessionBackend
) -> None:
    first, second, _ = replicas
    for sid in ("running", "old", "new"):
        await first.put("alice", sid, "agent", AgentState())
    for days, sid in ((30, "running"), (20, "old")):
        await postgres_backend.age(sid, days)
    assert await first.acquire("alice", "running") is not None
    assert await second.sweep(older_than=None, keep=1, busy=set()) == 1
    left = {s.session_id for s in await second.list("alice", 10, None)}
    assert left == {"running", "new"}  # "old" was beyond the count; "running" is leased


async def test_retention_deletes_a_session_whose_lease_expired(
    replicas: Replicas, postgres_backend: SessionBackend
) -> None:
    """An expired lease protects nothing: its holder hung or died."""
    first, second, _ = replicas
    await first.put("alice", "abandoned", "agent", AgentState())
    await postgres_backend.age("abandoned", 30)
    assert await first.acquire("alice", "abandoned") is not None
    await postgres_backend.expire_leases()
    cutoff = datetime.now(UTC) - timedelta(days=7)
    assert await second.sweep(older_than=cutoff, keep=None, busy=set()) == 1
    assert await second.get("alice", "abandoned") is None


async def test_a_renewal_keeps_every_lease_the_store_holds(replicas: Replicas) -> None:
    first, second, _ = replicas
    leases = [await first.acquire("alice", sid) for sid in ("a", "b")]
    assert None not in leases
    assert await first.renew() == []
    assert await second.renew() == []  # holds nothing, loses nothing
    for sid in ("a", "b"):
        assert await second.acquire("alice", sid) is None


async def test_a_released_lease_is_no_longer_renewed(replicas: Replicas) -> None:
    """Released, a lease is gone from the holder's table: no later renewal reports it lost
    (which would interrupt whatever reply then runs that session)."""
    first, _, _ = replicas
    lease = await first.acquire("alice", "s")
    assert lease is not None
    await first.release(lease)
    assert await first.renew() == []


async def test_a_holder_connection_the_server_ended_is_retaken_at_the_next_renewal(
    replicas: Replicas, postgres_backend: SessionBackend
) -> None:
    """The server ends the connection holding the holder's lock (a restart, an idle timeout,
    an administrator): the client sees nothing until it uses it. The next renewal retakes
    the lock, so the replica's live leases stay its own."""
    import psycopg

    first, second, _ = replicas
    lease = await first.acquire("alice", "s")
    assert lease is not None
    async with await psycopg.AsyncConnection.connect(postgres_backend.url, autocommit=True) as conn:
        cursor = await conn.execute(
            "SELECT pg_terminate_backend(pid, 10000) FROM pg_locks WHERE locktype = 'advisory'"
            " AND ((classid::bigint << 32) | objid::bigint) = %s AND objsubid = 1",
            (first.holder,),
        )
        assert await cursor.fetchall() == [(True,)]
    assert await first.renew() == []
    assert await second.acquire("alice", "s") is None
    await first.put("alice", "s", "agent", AgentState(), lease=lease)  # still its lease


async def test_a_lost_lease_is_reported_by_one_renewal_only(
    replicas: Replicas, postgres_backend: SessionBackend
) -> None:
    """Reported lost, a lease leaves the holder's table: a later renewal does not report it
    again (which would interrupt the reply running that session a second time)."""
    first, second, _ = replicas
    stale = await first.acquire("alice", "s")
    kept = await first.acquire("alice", "t")
    assert stale is not None and kept is not None
    await postgres_backend.expire_leases()
    assert await second.acquire("alice", "s") is not None
    assert await first.renew() == [stale]
    assert await first.renew() == []
    assert await second.acquire("alice", "t") is None  # renewed: no longer expired


async def test_two_renewals_at_once_report_the_lost_lease_once(
    replicas: Replicas, postgres_backend: SessionBackend
) -> None:
    """Both begin with the lease held; the one finishing second finds it already forgotten
    by the first (as after a release while a renewal runs) and does not report it again, so
    its reply is not interrupted twice."""
    first, second, _ = replicas
    stale = await first.acquire("alice", "s")
    assert stale is not None
    await postgres_backend.expire_leases()
    assert await second.acquire("alice", "s") is not None
    both = await asyncio.gather(first.renew(), first.renew())
    assert sorted(both, key=len) == [[], [stale]]
    assert await first.renew() == []


async def test_each_journal_step_is_announced_on_the_commits_channel(
    replicas: Replicas, postgres_backend: SessionBackend
) -> None:
    """The payload names the session, the reply, its status and its last event's number: what
    a watcher on another replica needs to read the new events."""
    import psycopg

    first, _, _ = replicas
    step = JournalStep("r1", "running", 3, 0, "step", b"request", [(1, b"a"), (2, b"b"), (3, b"c")])
    async with await psycopg.AsyncConnection.connect(
        postgres_backend.url, autocommit=True
    ) as watcher:
        await watcher.execute(f"LISTEN {first.commits_channel}")  # type: ignore[arg-type]
        await first.put("alice", "s", "agent", AgentState(), step=step)
        notes = [n async for n in watcher.notifies(timeout=SHORT_TIMEOUT, stop_after=1)]
    assert [json.loads(n.payload) for n in notes] == [["alice", "s", "r1", "running", 3]]


async def test_a_late_release_of_an_old_lease_keeps_the_newer_one(
    replicas: Replicas, postgres_backend: SessionBackend
) -> None:
    """The holder took the session again after its first lease expired; releasing the old
    lease late leaves the new one held and renewed, in the table and in the database."""
    first, second, _ = replicas
    old = await first.acquire("alice", "s")
    assert old is not None
    await postgres_backend.expire_leases()
    new = await first.acquire("alice", "s")
    assert new is not None and new.token > old.token
    await first.release(old)
    await postgres_backend.expire_leases()  # only the holder's renewal keeps it now
    assert await first.renew() == []
    assert await second.acquire("alice", "s") is None


async def test_an_interrupt_request_reaches_its_holder_only(replicas: Replicas) -> None:
    """Every replica listens on the namespace's channel; only the holder named acts. The
    holder is the one with the middle id, so the others' ids compare lower and higher."""
    low, mid, high = sorted(replicas, key=lambda store: store.holder)
    listeners = [store.interrupt_requests() for store in (low, mid, high)]
    assert await mid.acquire("alice", "s") is not None
    assert await low.signal_interrupt("alice", "s") is True
    async with asyncio.timeout(SHORT_TIMEOUT):
        assert await anext(listeners[1]) == ("alice", "s")
    for other in (listeners[0], listeners[2]):
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.3):  # silence: the request was not for this one
                await anext(other)
    await listeners[1].aclose()


async def test_a_closed_store_is_unusable(postgres_backend: SessionBackend) -> None:
    store = await postgres_backend.open()
    await store.close()
    with pytest.raises(RuntimeError, match="the session store is closed"):
        await store.get("alice", "s")


def _named(url: str, name: str) -> str:
    """`url` with every connection made through it labelled `name` in pg_stat_activity."""
    return f"{url}{'&' if '?' in url else '?'}application_name={name}"


async def _backends(url: str, name: str) -> int:
    """How many server processes serve connections labelled `name`."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cursor = await conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (name,)
        )
        [(count,)] = await cursor.fetchall()
    return int(count)


async def _until_none_left(url: str, name: str) -> None:
    """Wait until the server has ended every process of `name`'s connections (each one
    exits once its client has closed it)."""
    async with asyncio.timeout(SHORT_TIMEOUT):
        while await _backends(url, name):
            pass  # each poll is a round trip; bounded by the timeout


async def test_close_ends_the_pool_the_holder_and_the_listener_connections(
    postgres_backend: SessionBackend,
) -> None:
    name = f"hm_{uuid.uuid4().hex[:12]}"
    url = _named(postgres_backend.url, name)
    store = await PostgresSessionStore.open(url, namespace=postgres_backend.namespace)
    # What close must end (held here, so none is closed by being collected instead).
    opened = [store._pool, store._lock_conn, store._listen_conn]
    assert await _backends(postgres_backend.url, name) >= 3
    await store.close()
    assert [part.closed for part in opened] == [True, True, True]
    await _until_none_left(postgres_backend.url, name)
    await store.close()  # a second close has nothing left to do
    with pytest.raises(RuntimeError, match="the session store is closed"):
        await store.renew()  # a renewal still running when the store closed, say
    assert store._lock_conn is None  # it did not take the holder lock again


async def test_an_open_that_fails_ends_the_connections_it_made(
    postgres_backend: SessionBackend,
) -> None:
    """The holder and listener connections are made before the pool: a pool that cannot
    fill in time (here, no time at all) must not leave them, and the holder's lock, open."""
    from psycopg_pool import PoolTimeout

    name = f"hm_{uuid.uuid4().hex[:12]}"
    url = _named(postgres_backend.url, name)
    with pytest.raises(PoolTimeout) as failed:
        await PostgresSessionStore.open(
            url, namespace=postgres_backend.namespace, connect_timeout=1e-6
        )
    # The error's frames still hold the half-opened store: nothing is closed by collection.
    await _until_none_left(postgres_backend.url, name)
    assert failed.traceback


# --- a reply that outlives its lease ---------------------------------------------------------


@pytest.fixture
async def gate(tmp_path: Path) -> AsyncIterator[Gate]:
    async with Gate(tmp_path / "gate.sock") as opened:
        yield opened


@pytest.fixture
async def two_replicas(
    postgres_backend: SessionBackend, gate: Gate
) -> AsyncIterator[Callable[..., Awaitable[tuple[str, str]]]]:
    """Starts two agent replicas on the test's schema, whose replies to ``park`` wait at the
    gate (scripted answer ``hello there``); yields a function of config overrides that
    returns both addresses. The gate opens and both stop at the end."""
    services: list[AgentService] = []

    async def start(**overrides: Any) -> tuple[str, str]:
        settings = {
            "models": {"default": {"type": "scripted", "turns": ["hello there"], "repeat": True}},
            "middlewares": [
                {
                    "type": "local",
                    "import": "tests.mesh_app:GateMiddleware",
                    "params": {"path": str(gate.path)},
                }
            ],
            **overrides,
        }
        config = load_config(None, **postgres_backend.config(**settings))
        for _ in range(2):
            services.append(await start_agent_service(config, address="127.0.0.1:0"))
        return f"127.0.0.1:{services[-2].port}", f"127.0.0.1:{services[-1].port}"

    try:
        yield start
    finally:
        gate.open()
        for service in services:
            await service.stop(None)


async def _wait_past(backend: SessionBackend, when: datetime) -> None:
    """Wait on the database's clock (the one leases expire by) until `when` has passed."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(backend.url, autocommit=True) as conn:
        await conn.execute(
            "SELECT pg_sleep(greatest(0, extract(epoch FROM %s::timestamptz - now())) + 0.1)",
            (when,),
        )


async def _expiry(backend: SessionBackend) -> datetime:
    """When the one lease of the schema expires, as the database says now."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(backend.url, autocommit=True) as conn:
        cursor = await conn.execute(
            f"SELECT expire_time FROM {backend.namespace}.session_leases"  # type: ignore[arg-type]
        )
        [(expires,)] = await cursor.fetchall()
    return expires  # type: ignore[no-any-return]


async def _park(
    client: AgentClient, gate: Gate, session_id: str, durability: Any = ""
) -> AsyncIterator[Any]:
    """Start a reply that waits at the gate once it has begun; the rest of its events."""
    parked = client.reply(PARK, session_id=session_id, durability=durability)
    async with asyncio.timeout(SHORT_TIMEOUT):
        assert (await anext(parked)).type == "reply_start"
    await gate.wait_for(1, SHORT_TIMEOUT)
    return parked


async def test_a_reply_longer_than_its_lease_keeps_it(
    postgres_backend: SessionBackend, gate: Gate, two_replicas: Any
) -> None:
    """The replica renews the lease while the reply runs: past the lease's first expiry and
    past the next one the other replica still answers SESSION_BUSY, and the reply ends well
    (its session written, not SESSION_TAKEN_OVER)."""
    here, there = await two_replicas(sessions={"lease_seconds": 2.0})
    async with (
        AgentClient(here, timeout=SHORT_TIMEOUT) as one,
        AgentClient(there, timeout=SHORT_TIMEOUT) as two,
    ):
        parked = await _park(one, gate, "long")
        for _ in range(2):
            await _wait_past(postgres_backend, await _expiry(postgres_backend))
            with pytest.raises(AgentClientError) as busy:
                await two.text("me too", session_id="long")
            assert (busy.value.code, busy.value.reason) == (
                grpc.StatusCode.FAILED_PRECONDITION,
                "SESSION_BUSY",
            )
            assert busy.value.message.startswith("session long is already replying")
        gate.open()
        async with asyncio.timeout(SHORT_TIMEOUT):
            rest = [e async for e in parked]
        assert rest[-1].finish_reason == "completed"  # type: ignore[union-attr]
        assert await two.text("again", session_id="long") == "hello there"


async def test_an_interrupt_reaches_the_other_replica_for_the_owner_only(
    two_replicas: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Alice's reply waits in a tool on the first replica. On the second, Bob's Interrupt of
    that id is NOT_FOUND and leaves it running; Alice's is relayed through PostgreSQL and
    stops it (the tool is cancelled: nothing else would end it)."""
    GateState.reset()
    monkeypatch.setenv("HOOKMESH_TEST_TOKENS", "alice:tok-alice,bob:tok-bob")
    here, there = await two_replicas(
        auth={"token_env": "HOOKMESH_TEST_TOKENS"},
        tools=["tests.service_tools:gate"],
        models={"default": {"type": "scripted", "turns": [_GATE_CALL, "done"]}},
        middlewares=[],
    )
    async with (
        AgentClient(here, timeout=SHORT_TIMEOUT, token="tok-alice") as one,
        AgentClient(there, timeout=SHORT_TIMEOUT, token="tok-alice") as two,
        AgentClient(there, timeout=SHORT_TIMEOUT, token="tok-bob") as bob,
    ):
        running = asyncio.create_task(_events(one.reply("go", session_id="plans")))
        async with asyncio.timeout(SHORT_TIMEOUT):
            await GateState.started.wait()
        with pytest.raises(AgentClientError) as foreign:
            await bob.interrupt("plans")
        assert (foreign.value.code, foreign.value.reason) == (
            grpc.StatusCode.NOT_FOUND,
            "SESSION_NOT_FOUND",
        )
        assert (await one.get_session("plans")).status == "running"
        assert await two.interrupt("plans") is True
        events = await asyncio.wait_for(running, SHORT_TIMEOUT)
        assert events[-1].finish_reason == "interrupted"


_GATE_CALL = {"tool_calls": [{"name": "gate", "arguments": {}}]}


async def _events(stream: AsyncIterator[Any]) -> list[Any]:
    return [e async for e in stream]


async def test_an_exit_reply_whose_lease_was_taken_over_is_not_saved(
    postgres_backend: SessionBackend, gate: Gate, two_replicas: Any
) -> None:
    """The first replica hangs past its lease (expired by the test) while the second takes
    the session over and replies: the first reply (durability exit: nothing of it was
    saved, so nothing goes on) ends refused, ABORTED SESSION_TAKEN_OVER, and the session
    holds the second replica's turn only."""
    here, there = await two_replicas(sessions={"lease_seconds": 60.0})
    async with (
        AgentClient(here, timeout=SHORT_TIMEOUT) as one,
        AgentClient(there, timeout=SHORT_TIMEOUT) as two,
    ):
        parked = await _park(one, gate, "hung", "exit")
        await postgres_backend.expire_leases()  # the first replica hung past its lease
        assert await two.text("take over", session_id="hung") == "hello there"
        gate.open()
        with pytest.raises(AgentClientError) as lost:
            async with asyncio.timeout(SHORT_TIMEOUT):
                [e async for e in parked]
        assert (lost.value.code, lost.value.reason) == (
            grpc.StatusCode.ABORTED,
            "SESSION_TAKEN_OVER",
        )
        session = await two.get_session("hung")
    assert [text_of(m) for m in session.context] == ["take over", "hello there"]


async def test_a_renewal_that_finds_the_lease_gone_interrupts_the_reply(
    postgres_backend: SessionBackend, two_replicas: Any
) -> None:
    """Another holder takes the lease (the test writes it over, as a replica that found it
    expired would) while the reply waits in a tool: the next renewal sees it gone and
    interrupts the reply at once (nothing else ends the tool), whose last write, still
    fenced by the lost lease, is refused: ABORTED SESSION_TAKEN_OVER (an exit reply; a
    durable one re-attaches, below)."""
    GateState.reset()
    here, _ = await two_replicas(
        sessions={"lease_seconds": 1.5},
        tools=["tests.service_tools:gate"],
        models={"default": {"type": "scripted", "turns": [_GATE_CALL, "done"]}},
        middlewares=[],
    )
    async with AgentClient(here, timeout=SHORT_TIMEOUT) as one:
        stream = one.reply("go", session_id="stolen", durability="exit")
        running = asyncio.create_task(_events(stream))
        async with asyncio.timeout(SHORT_TIMEOUT):
            await GateState.started.wait()
        ns = postgres_backend.namespace
        await postgres_backend._execute(
            f"UPDATE {ns}.session_leases SET holder = 1, token = nextval('{ns}.lease_tokens'),"
            " expire_time = now() + interval '1 hour'"
        )
        with pytest.raises(AgentClientError) as lost:
            await asyncio.wait_for(running, SHORT_TIMEOUT)
        assert (lost.value.code, lost.value.reason) == (
            grpc.StatusCode.ABORTED,
            "SESSION_TAKEN_OVER",
        )
        assert not GateState.release.is_set()  # nothing but the interrupt ended the tool


async def test_a_durable_reply_whose_replica_hung_past_its_lease_goes_on_on_the_other(
    postgres_backend: SessionBackend, gate: Gate, two_replicas: Any
) -> None:
    """The first replica hangs past its lease while its (step-durable) reply waits: the
    second refuses a new reply (REPLY_RUNNING), and a watcher there continues the reply to
    its end; when the first wakes, its write is refused and its client re-attaches (no
    error), so both callers see the reply completed, and the session holds it once."""
    here, there = await two_replicas(sessions={"lease_seconds": 60.0})
    async with (
        AgentClient(here, timeout=SHORT_TIMEOUT) as one,
        AgentClient(there, timeout=SHORT_TIMEOUT) as two,
    ):
        parked = await _park(one, gate, "hung", "step")
        await postgres_backend.expire_leases()
        with pytest.raises(AgentClientError) as running:
            await two.text("take over", session_id="hung")
        assert running.value.reason == "REPLY_RUNNING"
        async with asyncio.timeout(SHORT_TIMEOUT):
            second = await _events(two.watch("hung"))  # continued there (inputs already in)
            gate.open()  # the first replica wakes
            first = await _events(parked)
        session = await two.get_session("hung")
    assert first[-1].type == second[-1].type == "reply_end"
    assert first[-1].finish_reason == second[-1].finish_reason == "completed"
    assert [text_of(m) for m in session.context] == [PARK, "hello there"]


# --- review fixes: renewal scope, the holder lock, the cached read, the schema -------------


async def test_a_lease_row_the_holder_no_longer_knows_expires(
    replicas: Replicas, postgres_backend: SessionBackend
) -> None:
    """A release whose delete failed (an outage) or an acquire whose reply was lost leaves a
    row of this holder that it does not hold: renewals must not keep it alive for ever."""
    first, second, _ = replicas
    forgotten = await first.acquire("alice", "s")
    kept = await first.acquire("alice", "t")
    assert forgotten is not None and kept is not None
    del first._held["alice", "s"]  # its release's DELETE never reached the server
    await postgres_backend.expire_leases()
    assert await first.renew() == []
    assert await second.acquire("alice", "s") is not None
    assert await second.acquire("alice", "t") is None  # the one it holds was renewed


async def test_a_renewal_holding_nothing_renews_no_forgotten_row(
    replicas: Replicas, postgres_backend: SessionBackend
) -> None:
    first, second, _ = replicas
    assert await first.acquire("alice", "s") is not None
    first._held.clear()
    await postgres_backend.expire_leases()
    assert await first.renew() == []
    assert await second.acquire("alice", "s") is not None


async def test_a_holder_lock_still_held_elsewhere_fails_the_renewal_at_once(
    postgres_backend: SessionBackend,
) -> None:
    """The holder's old connection broke on the client's side while the server still keeps
    it (and its lock): the renewal must not wait for the lock, nor leave its new connection
    open; once the server lets the old one go, the next renewal retakes the lock."""
    import psycopg

    name = f"hm_{uuid.uuid4().hex[:12]}"
    store = await PostgresSessionStore.open(
        _named(postgres_backend.url, name), namespace=postgres_backend.namespace
    )
    try:
        await store._lock_conn.close()
        async with await psycopg.AsyncConnection.connect(
            postgres_backend.url, autocommit=True
        ) as stale:
            await stale.execute("SELECT pg_advisory_lock(%s)", (store.holder,))
            async with asyncio.timeout(SHORT_TIMEOUT):
                with pytest.raises(RuntimeError, match="holder lock is still held"):
                    await store.renew()
            assert store._lock_conn is None or store._lock_conn.closed
        async with asyncio.timeout(SHORT_TIMEOUT):
            assert await store.renew() == []
        assert store._lock_conn is not None and not store._lock_conn.closed
    finally:
        await store.close()
    await _until_none_left(postgres_backend.url, name)


async def test_a_renewal_that_reconnects_while_the_store_closes_keeps_no_lock(
    postgres_backend: SessionBackend,
) -> None:
    """close() runs while the renewal makes its new holder connection: the renewal must give
    that connection up rather than hold the lock of a closed store."""
    name = f"hm_{uuid.uuid4().hex[:12]}"
    store = await PostgresSessionStore.open(
        _named(postgres_backend.url, name), namespace=postgres_backend.namespace
    )
    await store._lock_conn.close()  # the renewal reconnects without a probe
    renewal, _ = await asyncio.gather(store.renew(), store.close(), return_exceptions=True)
    assert isinstance(renewal, RuntimeError)
    assert store._lock_conn is None
    await _until_none_left(postgres_backend.url, name)


async def test_a_renewal_whose_holder_connection_hangs_fails_in_time(
    postgres_backend: SessionBackend,
) -> None:
    """A half-open holder connection (here: its server process stopped) never answers the
    probe: the renewal fails within a third of a lease, and drops that connection."""
    import os
    import signal

    store = await PostgresSessionStore.open(
        postgres_backend.url, namespace=postgres_backend.namespace, lease_seconds=3.0
    )
    try:
        assert await store.acquire("alice", "s") is not None
        cursor = await store._lock_conn.execute("SELECT pg_backend_pid()")
        [(pid,)] = await cursor.fetchall()
        os.kill(pid, signal.SIGSTOP)
        try:
            renewal = asyncio.create_task(store.renew())
            done, _ = await asyncio.wait({renewal}, timeout=SHORT_TIMEOUT)
            if not done:
                renewal.cancel()
            assert done == {renewal}, "the renewal waited on the hung connection"
            assert isinstance(renewal.exception(), TimeoutError)
            assert store._lock_conn.closed
            # It gave up while its lease still held: before another replica could take
            # the session, as the database's own clock tells.
            assert await _lease_still_valid(postgres_backend, "alice", "s")
        finally:
            os.kill(pid, signal.SIGCONT)
    finally:
        await store.close()


async def test_the_read_made_with_a_lease_goes_with_a_delete_a_forget_and_a_loss(
    replicas: Replicas, postgres_backend: SessionBackend
) -> None:
    """The session read with the lease answers the holder's first get only while it is
    still what the store has."""
    first, second, _ = replicas
    for sid in ("deleted", "forgotten", "lost"):
        await first.put("alice", sid, "agent", AgentState())
        assert await first.acquire("alice", sid) is not None
    assert await first.delete("alice", "deleted")
    assert await first.get("alice", "deleted") is None
    await postgres_backend.expire_leases()
    taken = await second.acquire("alice", "lost")
    assert taken is not None
    await second.put("alice", "lost", "other agent", AgentState(), lease=taken)
    assert [lease.session_id for lease in await first.renew()] == ["lost"]
    found = await first.get("alice", "lost")
    assert found is not None and found.agent_name == "other agent"
    await first.forget("alice")
    assert await first.get("alice", "forgotten") is None


async def test_a_start_leaves_an_existing_fence_function_alone(
    replicas: Replicas, postgres_backend: SessionBackend
) -> None:
    """Replacing it on every start would need every replica's role to own it."""
    import psycopg

    query = "SELECT xmin::text FROM pg_proc WHERE oid = to_regprocedure(%s)"
    signature = f"{postgres_backend.namespace}.fence(text,text,bigint)"
    async with await psycopg.AsyncConnection.connect(postgres_backend.url, autocommit=True) as conn:
        before = await (await conn.execute(query, (signature,))).fetchall()
        store = await postgres_backend.open()
        await store.close()
        after = await (await conn.execute(query, (signature,))).fetchall()
    assert len(before) == 1 and after == before


@pytest.mark.parametrize("namespace", ["agent\n", "", "Agent", "1agent", "a" * 64])
def test_a_namespace_that_is_not_a_plain_schema_name_is_refused(namespace: str) -> None:
    with pytest.raises(ValueError, match="namespace is 1-63 characters"):
        PostgresSessionStore("postgresql://unused", namespace=namespace)


async def _lease_still_valid(backend: SessionBackend, owner: str, session_id: str) -> bool:
    import psycopg

    async with await psycopg.AsyncConnection.connect(backend.url, autocommit=True) as conn:
        cursor = await conn.execute(
            f"SELECT expire_time > now() FROM {backend.namespace}.session_leases"
            " WHERE owner = %s AND session_id = %s",
            (owner, session_id),
        )
        [(valid,)] = await cursor.fetchall()
    return bool(valid)


async def test_a_release_of_a_lease_the_store_does_not_hold_keeps_its_own(
    replicas: Replicas, postgres_backend: SessionBackend
) -> None:
    """A release naming a token the store does not hold for that session (a newer one from
    a forged or mixed-up lease) gives up nothing: the held lease is still renewed."""
    first, second, _ = replicas
    held = await first.acquire("alice", "s")
    assert held is not None
    await first.release(Lease("alice", "s", held.token + 1))
    await postgres_backend.expire_leases()
    assert await first.renew() == []
    assert await second.acquire("alice", "s") is None
    await first.put("alice", "s", "agent", AgentState(), lease=held)


@pytest.mark.parametrize(
    "sqlstate",
    ["23514", "P0001"],  # a check violation and a raised exception: below and above HMLST
)
async def test_a_leased_write_refused_for_another_reason_is_not_a_lost_lease(
    replicas: Replicas, postgres_backend: SessionBackend, sqlstate: str
) -> None:
    """Only the fence's own SQLSTATE means the lease is gone: any other refusal of a leased
    write reaches the caller as the database error it is, and the lease stays usable."""
    import psycopg

    first, second, _ = replicas
    lease = await first.acquire("alice", "s")
    assert lease is not None
    ns = postgres_backend.namespace
    await postgres_backend._execute(
        f"CREATE FUNCTION {ns}.refuse_{sqlstate.lower()}() RETURNS trigger LANGUAGE plpgsql"
        f" AS $$ BEGIN RAISE EXCEPTION 'refused' USING ERRCODE = '{sqlstate}'; END $$"
    )
    await postgres_backend._execute(
        f"CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON {ns}.sessions"
        f" FOR EACH ROW EXECUTE FUNCTION {ns}.refuse_{sqlstate.lower()}()"
    )
    with pytest.raises(psycopg.Error) as refused:
        await first.put("alice", "s", "agent", AgentState(), lease=lease)
    assert not isinstance(refused.value, LeaseLostError)
    assert refused.value.sqlstate == sqlstate
    await postgres_backend._execute(f"DROP TRIGGER refuse ON {ns}.sessions")
    await first.put("alice", "s", "agent", AgentState(), lease=lease)
    assert await second.acquire("alice", "s") is None


async def _lock_waiters(url: str, at_least: int) -> None:
    """Wait until `at_least` statements wait on a row lock."""
    import psycopg

    async with (
        asyncio.timeout(SHORT_TIMEOUT),
        await psycopg.AsyncConnection.connect(url, autocommit=True) as conn,
    ):
        while True:  # each poll is a round trip; bounded by the timeout
            cursor = await conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            )
            [(waiting,)] = await cursor.fetchall()
            if waiting >= at_least:
                return


async def test_a_lease_released_while_its_renewal_waits_is_not_reported_lost(
    replicas: Replicas, postgres_backend: SessionBackend
) -> None:
    """The renewal's UPDATE waits on the lease's row; meanwhile the reply ends and releases
    the lease, and the row is gone when the UPDATE goes on: nothing is lost, nothing
    raised."""
    import psycopg

    first, second, _ = replicas
    lease = await first.acquire("alice", "s")
    assert lease is not None
    ns = postgres_backend.namespace
    async with await psycopg.AsyncConnection.connect(postgres_backend.url) as locker:
        await locker.execute(
            f"DELETE FROM {ns}.session_leases WHERE owner = 'alice' AND session_id = 's'"
        )  # in a transaction: the row stays locked until the commit
        renewal = asyncio.create_task(first.renew())
        await _lock_waiters(postgres_backend.url, 1)  # the renewal's UPDATE
        release = asyncio.create_task(first.release(lease))
        await _lock_waiters(postgres_backend.url, 2)  # and the release's DELETE
        await locker.commit()
    async with asyncio.timeout(SHORT_TIMEOUT):
        assert await renewal == []
        await release
    assert await second.acquire("alice", "s") is not None


async def test_a_drain_waits_for_every_claimed_reply(replicas: Replicas) -> None:
    """Shutdown's drain returns only once the last claim of the replica has ended."""
    from hookmesh.services.agent._claims import SessionClaims

    first, _, _ = replicas
    claims = SessionClaims(first.leases)
    await claims.claim(("alice", "a"))
    await claims.claim(("alice", "b"))
    await claims.release(("alice", "a"))
    with pytest.raises(TimeoutError):  # "b" still runs: the drain must not end
        await claims.drain(0.05)
    await claims.release(("alice", "b"))
    await claims.drain(SHORT_TIMEOUT)
    assert claims.busy() == set()


async def test_a_claim_ends_even_when_its_lease_cannot_be_released(
    replicas: Replicas, postgres_backend: SessionBackend
) -> None:
    """The store went away under the reply: the release of its lease fails, the claim ends
    anyway (no error reaches the reply's caller, the drain is not held up), and the lease
    frees itself on expiry."""
    from hookmesh.services.agent._claims import SessionClaims

    first, second, _ = replicas
    claims = SessionClaims(first.leases)
    await claims.claim(("alice", "s"))
    await first.close()
    await claims.release(("alice", "s"))
    assert ("alice", "s") not in claims
    await claims.drain(SHORT_TIMEOUT)
    await postgres_backend.expire_leases()
    assert await second.acquire("alice", "s") is not None
