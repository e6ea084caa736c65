"""The session store: what every backend shares, written once (rows to sessions and back,
listing pages, retention, the leases' shape, the reply journal); SQLite and PostgreSQL
supply the rest.

Sessions belong to a principal: the key is (owner, session id), so one principal's ids say
nothing about another's. Listing reads only the summary columns, never the state JSON.

The reply journal is two tables beside the sessions: one row per reply (its status, last
sequence number, request and durability) and its events by sequence number. A journal step
is written in the same transaction as the session's state, so the two never disagree.
"""

from __future__ import annotations

import abc
import dataclasses
import json
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from hookmesh.agent import AgentState
from hookmesh.schema import ToolCall
from hookmesh.server import store_outages

log = logging.getLogger("hookmesh.agent_service")

_STORE = "session store"
"""The store's name in outage messages."""
_GET = (
    "SELECT agent_name, awaiting, pending_json, state_json, create_time, update_time"
    " FROM {table} WHERE owner = {mark} AND session_id = {mark}"
)
_LIST = (
    "SELECT session_id, agent_name, awaiting, pending_json, create_time, update_time"
    " FROM {table} WHERE owner = {mark}{after}"
    " ORDER BY update_time DESC, session_id DESC LIMIT {mark}"
)
_AFTER = " AND (update_time, session_id) < ({time}, {mark})"
_DELETE = "DELETE FROM {table} WHERE owner = {mark} AND session_id = {mark} RETURNING 1"
_DELETE_JOURNAL = (
    "DELETE FROM {events} WHERE owner = {mark} AND session_id = {mark}",
    "DELETE FROM {replies} WHERE owner = {mark} AND session_id = {mark}",
)
_REPLY = (
    "SELECT reply_id, status, last_seq, step_seq, durability, request, update_time"
    " FROM {replies}"
    " WHERE owner = {mark} AND session_id = {mark}"
)
_BY_ID = " AND reply_id = {mark}"
_LATEST = " ORDER BY update_time DESC, reply_id DESC LIMIT 1"
_EVENTS = (
    "SELECT seq, event FROM {events} WHERE owner = {mark} AND session_id = {mark}"
    " AND reply_id = {mark} AND seq > {mark} ORDER BY seq LIMIT {mark}"
)
_ORPHANS = (
    "SELECT owner, session_id, reply_id, status, last_seq, step_seq, durability, request,"
    " update_time FROM {replies} r WHERE status = 'running' AND NOT {held}"
    " ORDER BY update_time LIMIT {mark}"
)
_ENDED_BEFORE = (
    "SELECT owner, session_id, reply_id FROM {replies}"
    " WHERE status <> 'running' AND update_time < {time}"
)
_DELETE_REPLY = (
    "DELETE FROM {events} WHERE owner = {mark} AND session_id = {mark} AND reply_id = {mark}",
    "DELETE FROM {replies} WHERE owner = {mark} AND session_id = {mark} AND reply_id = {mark}",
)
_STALE = "SELECT owner, session_id FROM {table} s WHERE update_time < {time} AND NOT {leased}"
_BEYOND = (
    "SELECT owner, session_id FROM (SELECT owner, session_id FROM {table}"
    " ORDER BY update_time DESC, session_id DESC {rest}) s WHERE NOT {leased}"
)
_DELETE_EACH = "DELETE FROM {table} WHERE owner = {mark} AND session_id = {mark}"
_USER_SESSIONS = "SELECT session_id FROM {table} WHERE owner = {mark}"
_USER_BUSY = (
    "SELECT 1 FROM {replies} WHERE owner = {mark} AND status = 'running'"
    " UNION ALL SELECT 1 FROM {table} s WHERE s.owner = {mark} AND {leased}"
)
_FORGET = (
    ("agent.reply_events", "DELETE FROM {events} WHERE owner = {mark} RETURNING 1"),
    ("agent.replies", "DELETE FROM {replies} WHERE owner = {mark} RETURNING 1"),
    ("agent.sessions", "DELETE FROM {table} WHERE owner = {mark} RETURNING 1"),
)
"""Erasure of one user, journal first (a cut erasure leaves no journal without its session
that retention would not find)."""
_EXPORT: dict[str, tuple[str, tuple[Any, ...]]] = {
    "agent.sessions": (
        "SELECT session_id, agent_name, create_time, update_time, state_json FROM {table}"
        " WHERE owner = {mark} AND session_id > {mark} ORDER BY session_id LIMIT {mark}",
        ("",),
    ),
    "agent.replies": (
        "SELECT session_id, reply_id, status, last_seq, durability, request, update_time"
        " FROM {replies} WHERE owner = {mark} AND (session_id, reply_id) > ({mark}, {mark})"
        " ORDER BY session_id, reply_id LIMIT {mark}",
        ("", ""),
    ),
    "agent.reply_events": (
        "SELECT session_id, reply_id, seq, event FROM {events} WHERE owner = {mark}"
        " AND (session_id, reply_id, seq) > ({mark}, {mark}, {mark})"
        " ORDER BY session_id, reply_id, seq LIMIT {mark}",
        ("", "", -1),
    ),
}
"""A user's rows of each table, one page after a cursor (the key columns of the last row,
which lead the selection; the first page's cursor is given): keyset paging, so a page costs
the same at any depth."""
EXPORT_TABLES = tuple(_EXPORT)
"""The tables `SessionStore.export` reads, in export order."""
JOURNAL_REPLY = (
    "INSERT INTO {replies} (owner, session_id, reply_id, status, last_seq, step_seq, durability,"
    " request, update_time) VALUES ({mark}, {mark}, {mark}, {mark}, {mark}, {mark}, {mark},"
    " {mark}, {now}) ON CONFLICT (owner, session_id, reply_id) DO UPDATE SET"
    " status = excluded.status, last_seq = excluded.last_seq, step_seq = excluded.step_seq,"
    " durability = excluded.durability, request = excluded.request,"
    " update_time = excluded.update_time"
)
"""A step's upsert of its reply's journal row (`now`: the backend's current time)."""
JOURNAL_EVENT = (
    "INSERT INTO {events} (owner, session_id, reply_id, seq, event)"
    " VALUES ({mark}, {mark}, {mark}, {mark}, {mark})"
    " ON CONFLICT (owner, session_id, reply_id, seq) DO UPDATE SET event = excluded.event"
)
"""A step's insert of one new event (a step run again after a cut replaces what the cut run
saved under the same number)."""
UPSERT_SET = (
    "agent_name = excluded.agent_name, awaiting = excluded.awaiting,"
    " pending_json = excluded.pending_json, state_json = excluded.state_json"
)
"""What a write of an existing session replaces (every backend's upsert sets this, and its
update time)."""

Params = Sequence[Any] | Mapping[str, Any]
"""A statement's parameters: positional, or by name where the driver has named ones."""
Rows = list[tuple[Any, ...]]
"""What a statement returns (a name of its own: `SessionStore.list` hides the builtin)."""
SessionRow = tuple[str, str, str, str, str, str]
"""What a write stores: owner, session id, agent name, ``awaiting``, ``pending_json`` and
``state_json``, in that column order."""

ReplyStatus = str
"""``running`` (in flight, or cut off: an orphan when no replica holds its session),
``paused`` (awaiting confirmation or results) or ``ended``."""


@dataclass(frozen=True)
class ReplyRecord:
    """A reply as the journal knows it."""

    owner: str
    session_id: str
    reply_id: str
    status: ReplyStatus
    last_seq: int
    """The sequence number of its last saved event (0 before any)."""
    step_seq: int
    """The sequence number of the last event before its last saved step: a reply continued
    elsewhere numbers its events on from here (the events of a step cut off are run again,
    under the same numbers)."""
    durability: str
    """``step``, ``event`` or ``exit``."""
    request: bytes
    """What the reply needs to continue elsewhere: the ReplyRequest's options and client
    tools (no messages), as protobuf bytes."""
    update_time: datetime


@dataclass(frozen=True)
class JournalStep:
    """What one write adds to a reply's journal, beside the session's state."""

    reply_id: str
    status: ReplyStatus
    last_seq: int
    """The reply's last sequence number after this step."""
    step_seq: int
    """The last sequence number of the reply's last step (`ReplyRecord.step_seq`)."""
    durability: str
    request: bytes
    events: Sequence[tuple[int, bytes]] = ()
    """Events not saved before: (sequence number, AgentEvent protobuf bytes)."""


@dataclass
class SessionSummary:
    """A session without its state: what listings show."""

    owner: str
    session_id: str
    agent_name: str
    create_time: datetime
    update_time: datetime
    awaiting: str = ""
    """``confirmation``, ``external`` or empty: what a paused reply waits for."""
    pending_calls: list[ToolCall] = field(default_factory=list)
    """The calls the paused reply waits on."""


@dataclass
class StoredSession(SessionSummary):
    """A session as stored, with its state."""

    state: AgentState = field(default_factory=AgentState)


def summary_fields(state: AgentState) -> tuple[str, str]:
    """The ``awaiting`` and ``pending_json`` columns of a state (kept beside the JSON)."""
    pending = state.pending
    if pending is None:
        return "", "[]"
    calls = pending.confirm_calls if pending.awaiting == "confirmation" else pending.external_calls
    return pending.awaiting, json.dumps([c.model_dump() for c in calls])


def pending_from_json(text: str) -> list[ToolCall]:
    """The pending calls of a ``pending_json`` column."""
    return [ToolCall.model_validate(c) for c in json.loads(text)]


def _record(owner: str, session_id: str, row: Sequence[Any]) -> ReplyRecord:
    reply_id, status, last_seq, step_seq, durability, request, updated = row
    return ReplyRecord(
        owner,
        session_id,
        reply_id,
        status,
        int(last_seq),
        int(step_seq),
        durability,
        bytes(request),
        _time(updated),
    )


def _time(value: datetime | str) -> datetime:
    """A time column as read: typed by drivers that have a time type, ISO 8601 text in
    SQLite (which compares it as text, so it is always written in one format)."""
    return value if isinstance(value, datetime) else datetime.fromisoformat(value)


@dataclass(frozen=True)
class Lease:
    """The right to run a reply of one session, across every replica sharing the store.

    `token` is a fencing token: it grows with every grant, and a write that carries a token
    the store no longer holds is refused (`LeaseLostError`).
    """

    owner: str
    session_id: str
    token: int


class LeaseLostError(Exception):
    """The lease was taken over by another replica (it expired first): the write is refused."""


class SessionLeases(Protocol):
    """Per-reply leases of a store that several replicas share."""

    async def acquire(self, owner: str, session_id: str) -> Lease | None:
        """The session's lease, or None while another holder keeps it."""
        ...

    async def renew(self) -> list[Lease]:
        """Extend every lease this store holds; returns those it has lost."""
        ...

    async def release(self, lease: Lease) -> None:
        """Give the lease up (no effect when it was lost)."""
        ...

    async def signal_interrupt(self, owner: str, session_id: str) -> bool:
        """Ask the live replica that holds the session's lease to interrupt its reply; False
        when no other live replica holds one."""
        ...

    def interrupt_requests(self) -> AsyncIterator[tuple[str, str]]:
        """The ``(owner, session id)`` of each interrupt other replicas ask of this one, as
        they come; ends (or raises) when the store's connection for them breaks."""
        ...


@dataclass(frozen=True)
class Dialect:
    """How a backend's SQL says what the shared statements need."""

    table: str
    """The sessions table (in its schema, where the backend has schemas)."""
    mark: str
    """The driver's positional parameter placeholder."""
    time: str
    """The placeholder of a time given as ISO 8601 text."""
    rest: str
    """The clause keeping the rows after the first n (n its one parameter)."""
    leased: str
    """A condition true for a session row ``s`` whose lease some replica holds (retention
    spares it): ``false`` where the in-process claims are the only ones."""
    replies: str
    """The journal's replies table."""
    events: str
    """The journal's events table."""
    held: str
    """A condition true for a reply row ``r`` whose session a live replica holds (its reply
    is no orphan): ``false`` where one process owns the store."""


class SessionStore(abc.ABC):
    """Where sessions live: the logic every backend shares; a backend supplies its
    connections (`_execute`, `_execute_many`, `_write`, `close`), its `Dialect`, and
    `leases` when several processes share it.

    Any store call may raise `RequestError` UNAVAILABLE ``STORE_UNAVAILABLE`` when the
    backend cannot be reached (`hookmesh.server.store_outages`), which the agent service
    answers as is; other faults are raised as the driver raised them. Implementations must
    be safe to call from one event loop.

    Args:
        dialect: The backend's SQL dialect.
    """

    def __init__(self, dialect: Dialect) -> None:
        self._names = dataclasses.asdict(dialect)

    @property
    def leases(self) -> SessionLeases | None:
        """Leases when several processes share the store (PostgreSQL); None when one process
        owns it (SQLite), so its in-process claim is the whole story."""
        return None

    async def get(self, owner: str, session_id: str) -> StoredSession | None:
        """The session, or None (also when another principal owns that id)."""
        return self._session(owner, session_id, await self._rows(*self._read(owner, session_id)))

    def _read(self, owner: str, session_id: str) -> tuple[str, Params]:
        """The statement `get` runs, with its parameters."""
        return self._sql(_GET), (owner, session_id)

    @staticmethod
    def _session(owner: str, session_id: str, rows: Rows) -> StoredSession | None:
        """The session `_read`'s rows hold, or None."""
        if not rows:
            return None
        name, awaiting, pending, state, created, updated = rows[0]
        return StoredSession(
            owner,
            session_id,
            name,
            _time(created),
            _time(updated),
            awaiting,
            pending_from_json(pending),
            AgentState.model_validate_json(state),
        )

    async def put(
        self,
        owner: str,
        session_id: str,
        agent_name: str,
        state: AgentState,
        *,
        lease: Lease | None = None,
        step: JournalStep | None = None,
    ) -> None:
        """Create or replace the session's state; with a `lease`, only while it holds; with
        a `step`, the reply's journal row and new events in the same transaction.

        Raises:
            LeaseLostError: `lease` was taken over by another holder.
        """
        awaiting, pending = summary_fields(state)
        row = (owner, session_id, agent_name, awaiting, pending, state.model_dump_json())
        with store_outages(_STORE, log):
            await self._write(row, lease, step)

    async def reply(self, owner: str, session_id: str, reply_id: str = "") -> ReplyRecord | None:
        """The session's reply `reply_id` in the journal (its latest when empty), or None."""
        sql = self._sql(_REPLY) + (self._sql(_BY_ID) if reply_id else _LATEST)
        rows = await self._rows(sql, (owner, session_id, *((reply_id,) if reply_id else ())))
        return _record(owner, session_id, rows[0]) if rows else None

    async def events(
        self, owner: str, session_id: str, reply_id: str, after_seq: int, limit: int = 1000
    ) -> list[tuple[int, bytes]]:
        """Up to `limit` saved events of the reply after `after_seq`, in order."""
        rows = await self._rows(self._sql(_EVENTS), (owner, session_id, reply_id, after_seq, limit))
        return [(int(seq), bytes(event)) for seq, event in rows]

    async def orphans(self, limit: int = 100) -> list[ReplyRecord]:
        """Replies left running whose session no live replica holds (their replica died,
        hung past its lease, or handed them over), oldest first."""
        rows = await self._rows(self._sql(_ORPHANS), (limit,))
        return [_record(o, s, r) for o, s, *r in rows]

    async def list(
        self, owner: str, limit: int, after: tuple[str, str] | None
    ) -> list[SessionSummary]:
        """The owner's sessions by update time, newest first, after the (update time in ISO
        8601, id) cursor."""
        sql = self._sql(_LIST, after=self._sql(_AFTER) if after is not None else "")
        rows = await self._rows(sql, (owner, *(after or ()), limit))
        return [
            SessionSummary(
                owner, sid, name, _time(created), _time(updated), awaiting, pending_from_json(p)
            )
            for sid, name, awaiting, p, created, updated in rows
        ]

    async def delete(self, owner: str, session_id: str) -> bool:
        """Delete, with its journal; False when it did not exist."""
        for sql in _DELETE_JOURNAL:
            await self._rows(self._sql(sql), (owner, session_id))
        return bool(await self._rows(self._sql(_DELETE), (owner, session_id)))

    async def user_sessions(self, owner: str) -> tuple[str, ...]:
        """The ids of every session `owner` has."""
        return tuple(sid for (sid,) in await self._rows(self._sql(_USER_SESSIONS), (owner,)))

    async def user_busy(self, owner: str) -> bool:
        """Whether a reply of `owner` runs (or waits to be continued) on any replica sharing
        the store: its journal says running, or a replica holds one of its sessions."""
        return bool(await self._rows(self._sql(_USER_BUSY), (owner, owner)))

    async def forget(self, owner: str) -> tuple[tuple[str, int], ...]:
        """Delete every session of `owner` with its journal; (store, rows deleted) each."""
        return tuple(
            [(name, len(await self._rows(self._sql(sql), (owner,)))) for name, sql in _FORGET]
        )

    async def export(self, owner: str, table: str, page: int) -> AsyncIterator[Rows]:
        """Every row `owner` has in `table` (one of `EXPORT_TABLES`), in pages of up to
        `page` rows in key order; the columns as `_EXPORT` selects them."""
        sql, cursor = _EXPORT[table]
        width = len(cursor)
        while True:
            rows = await self._rows(self._sql(sql), (owner, *cursor, page))
            if rows:
                yield rows
            if len(rows) < page:
                return
            cursor = tuple(rows[-1][:width])

    async def sweep(
        self,
        *,
        older_than: datetime | None,
        keep: int | None,
        busy: set[tuple[str, str]],
        journal_before: datetime | None = None,
    ) -> int:
        """Delete sessions last updated before `older_than`, then the oldest beyond `keep`
        (over all owners), except the `busy` (owner, id) pairs and the sessions leased by
        any replica, each with its journal; then the journals of replies that ended (or
        paused) before `journal_before`. Returns how many sessions went."""
        victims: Rows = []
        if older_than is not None:
            victims += await self._rows(self._sql(_STALE), (older_than.isoformat(),))
        if keep is not None:
            victims += await self._rows(self._sql(_BEYOND), (keep,))
        doomed = sorted({(o, s) for o, s in victims} - busy)
        if doomed:
            with store_outages(_STORE, log):
                for sql in (*_DELETE_JOURNAL, _DELETE_EACH):
                    await self._execute_many(self._sql(sql), doomed)
        if journal_before is not None:
            old = await self._rows(self._sql(_ENDED_BEFORE), (journal_before.isoformat(),))
            if old:
                with store_outages(_STORE, log):
                    for sql in _DELETE_REPLY:
                        await self._execute_many(self._sql(sql), old)
        return len(doomed)

    @abc.abstractmethod
    async def close(self) -> None:
        """Release connections; the store is unusable after."""

    def _sql(self, template: str, **more: str) -> str:
        """`template` in this backend's dialect (its ``{fields}`` named as in `Dialect`)."""
        return template.format(**self._names, **more)

    async def _rows(self, sql: str, params: Params = ()) -> Rows:
        """`_execute`, an outage raised as UNAVAILABLE ``STORE_UNAVAILABLE``."""
        with store_outages(_STORE, log):
            return await self._execute(sql, params)

    async def _batch(self, statements: Sequence[tuple[str, Params]]) -> tuple[Rows, ...]:
        """`_execute_batch`, an outage raised as UNAVAILABLE ``STORE_UNAVAILABLE``."""
        with store_outages(_STORE, log):
            return await self._execute_batch(statements)

    async def _execute_batch(self, statements: Sequence[tuple[str, Params]]) -> tuple[Rows, ...]:
        """Run `statements` in order, each in a transaction of its own, and return the rows
        of each; a backend with a network between it and its database sends them at once."""
        return tuple([await self._execute(sql, params) for sql, params in statements])

    # --- what a backend supplies -----------------------------------------------------------

    @abc.abstractmethod
    async def _execute(self, sql: str, params: Params) -> Rows:
        """Run one statement in a transaction of its own; its rows (none if it has none)."""

    @abc.abstractmethod
    async def _execute_many(self, sql: str, params: Sequence[Sequence[Any]]) -> None:
        """Run one statement once per parameter row."""

    @abc.abstractmethod
    async def _write(self, row: SessionRow, lease: Lease | None, step: JournalStep | None) -> None:
        """Insert the session or replace its `UPSERT_SET` columns, times by the backend's
        clock; with a `lease`, only while it holds (else `LeaseLostError`); with a `step`,
        in the same transaction, upsert the reply's row (`journal_reply`) and insert its new
        events (`JOURNAL_EVENT`)."""

    def journal_params(
        self, owner: str, session_id: str, step: JournalStep
    ) -> tuple[tuple[Any, ...], Rows]:
        """The parameters of a step's reply upsert and of each event insert."""
        reply = (
            owner,
            session_id,
            step.reply_id,
            step.status,
            step.last_seq,
            step.step_seq,
            step.durability,
            step.request,
        )
        events: Rows = [
            (owner, session_id, step.reply_id, seq, event) for seq, event in step.events
        ]
        return reply, events
