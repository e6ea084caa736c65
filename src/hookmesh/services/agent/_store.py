"""The session store: what every backend shares, written once (rows to sessions and back,
listing pages, retention, the leases' shape); SQLite and PostgreSQL supply the rest.

Sessions belong to a principal: the key is (owner, session id), so one principal's ids say
nothing about another's. Listing reads only the summary columns, never the state JSON.
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
_STALE = "SELECT owner, session_id FROM {table} s WHERE update_time < {time} AND NOT {leased}"
_BEYOND = (
    "SELECT owner, session_id FROM (SELECT owner, session_id FROM {table}"
    " ORDER BY update_time DESC, session_id DESC {rest}) s WHERE NOT {leased}"
)
_DELETE_EACH = "DELETE FROM {table} WHERE owner = {mark} AND session_id = {mark}"
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
        rows = await self._rows(self._sql(_GET), (owner, session_id))
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
    ) -> None:
        """Create or replace the session's state; with a `lease`, only while it holds.

        Raises:
            LeaseLostError: `lease` was taken over by another holder.
        """
        awaiting, pending = summary_fields(state)
        row = (owner, session_id, agent_name, awaiting, pending, state.model_dump_json())
        with store_outages(_STORE, log):
            await self._write(row, lease)

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
        """Delete; False when it did not exist."""
        return bool(await self._rows(self._sql(_DELETE), (owner, session_id)))

    async def sweep(
        self, *, older_than: datetime | None, keep: int | None, busy: set[tuple[str, str]]
    ) -> int:
        """Delete sessions last updated before `older_than`, then the oldest beyond `keep`
        (over all owners), except the `busy` (owner, id) pairs and the sessions leased by
        any replica; returns how many went."""
        victims: Rows = []
        if older_than is not None:
            victims += await self._rows(self._sql(_STALE), (older_than.isoformat(),))
        if keep is not None:
            victims += await self._rows(self._sql(_BEYOND), (keep,))
        doomed = sorted({(o, s) for o, s in victims} - busy)
        if doomed:
            with store_outages(_STORE, log):
                await self._execute_many(self._sql(_DELETE_EACH), doomed)
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

    # --- what a backend supplies -----------------------------------------------------------

    @abc.abstractmethod
    async def _execute(self, sql: str, params: Params) -> Rows:
        """Run one statement in a transaction of its own; its rows (none if it has none)."""

    @abc.abstractmethod
    async def _execute_many(self, sql: str, params: Sequence[Sequence[Any]]) -> None:
        """Run one statement once per parameter row."""

    @abc.abstractmethod
    async def _write(self, row: SessionRow, lease: Lease | None) -> None:
        """Insert the session or replace its `UPSERT_SET` columns, times by the backend's
        clock; with a `lease`, only while it holds (else `LeaseLostError`)."""
