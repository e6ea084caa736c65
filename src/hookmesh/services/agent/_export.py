"""Export of one user on request: what the stores `ForgetUser` reaches hold about them, as
JSON records streamed in bounded batches (docs/security.md, "Export format")."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from typing import Any

from google.protobuf.json_format import MessageToDict

from hookmesh.client import AgentClientError, MemoryClient, RetrievalClient
from hookmesh.memory import Memory, MemoryScope
from hookmesh.retrieval import StoredDocument
from hookmesh.services.a2a import export_tasks
from hookmesh.services.agent._config import ErasureConfig, secret
from hookmesh.services.agent._forget import Middlewares, check_user, user_data_holders
from hookmesh.services.agent._store import EXPORT_TABLES, SessionStore
from hookmesh.services.agent._store_reach import failed_call, failed_files, unreachable
from hookmesh.v1 import agent_pb2 as _agent_pb2
from hookmesh.v1 import event_pb2 as _event_pb2

audit = logging.getLogger("hookmesh.audit")

BATCH_RECORDS = 256
"""Most records in one streamed batch."""
BATCH_BYTES = 1024 * 1024
"""About the most JSON text in one batch (a larger record travels alone)."""
_SESSION_PAGE = 16
"""Sessions read per query: a session's state is its whole context, so pages stay small."""
_ROW_PAGE = 500
_MEMORY_PAGE = 100
_DOCUMENT_PAGE = 100
_MEMORY_TIMEOUT = 60.0
_LEFT = "the export is incomplete"

Record = tuple[str, str]
"""(store, the record as one line of JSON)."""


def _dumps(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _iso(value: datetime | str) -> str:
    return value.isoformat() if isinstance(value, datetime) else value


def _proto_json(message: Any) -> dict[str, Any]:
    return MessageToDict(message, preserving_proto_field_name=True)


def _row_record(table: str, row: Sequence[Any]) -> dict[str, Any]:
    """A session store row as its export record."""
    if table == "agent.sessions":
        session_id, agent_name, created, updated, state = row
        return {
            "session_id": session_id,
            "agent_name": agent_name,
            "create_time": _iso(created),
            "update_time": _iso(updated),
            "state": json.loads(state),
        }
    if table == "agent.replies":
        session_id, reply_id, status, last_seq, durability, request, updated = row
        return {
            "session_id": session_id,
            "reply_id": reply_id,
            "status": status,
            "last_seq": int(last_seq),
            "durability": durability,
            "request": _proto_json(_agent_pb2.ReplyRequest.FromString(bytes(request))),
            "update_time": _iso(updated),
        }
    session_id, reply_id, seq, event = row
    return {
        "session_id": session_id,
        "reply_id": reply_id,
        "seq": int(seq),
        "event": _proto_json(_event_pb2.AgentEvent.FromString(bytes(event))),
    }


def _document_record(doc: StoredDocument) -> dict[str, Any]:
    return {
        "knowledge_base": doc.knowledge_base,
        "id": doc.id,
        "text": doc.text,
        "metadata": dict(doc.metadata),
        "create_time": doc.create_time.isoformat(),
        "update_time": doc.update_time.isoformat(),
    }


def _memory_record(memory: Memory) -> dict[str, Any]:
    return {
        "id": memory.id,
        "text": memory.text,
        "agent_id": memory.scope.agent_id,
        "session_id": memory.scope.session_id,
        "metadata": dict(memory.metadata),
        "create_time": memory.create_time.isoformat(),
        "update_time": memory.update_time.isoformat(),
        "source_message_ids": list(memory.source_message_ids),
        "origin": memory.origin,
    }


class UserExporter:
    """Reads a user's records from the session store and the stores `config` names.

    Args:
        store: The agent service's session store.
        config: Where the A2A tasks and the memory service are (as for erasure).
        middlewares: The current chain's middlewares; those that hold user data are read.
    """

    def __init__(
        self, store: SessionStore, config: ErasureConfig, middlewares: Middlewares = list
    ) -> None:
        self.store = store
        self.config = config
        self.middlewares = middlewares

    async def batches(self, user_id: str, caller: str) -> AsyncIterator[list[Record]]:
        """The user's records in export order, in batches of at most `BATCH_RECORDS` and
        about `BATCH_BYTES`, each of one store (so a store that fails later leaves the
        earlier ones received); the audit line once the last is out.

        Raises:
            SchemaError: INVALID_ARGUMENT ``INVALID_USER_ID`` (before any batch).
            RequestError: UNAVAILABLE ``EXPORT_STORE_UNAVAILABLE`` naming the store.
        """
        user = check_user(user_id)
        counts: dict[str, int] = {}
        batch: list[Record] = []
        size = 0
        async for store, record in self._records(user):
            counts[store] = counts.get(store, 0) + 1
            line = _dumps(record)
            full = len(batch) == BATCH_RECORDS or size + len(line) > BATCH_BYTES
            if batch and (full or batch[-1][0] != store):  # a store's records go out whole
                yield batch
                batch, size = [], 0
            batch.append((store, line))
            size += len(line)
        if batch:
            yield batch
        audit.warning(
            "export user %r by %r: %s",
            user,
            caller,
            ", ".join(f"{store}={counts.get(store, 0)}" for store in self.stores()),
        )

    def stores(self) -> tuple[str, ...]:
        """The stores an export reads, in order."""
        return (
            *EXPORT_TABLES,
            *(("a2a.tasks",) if self.config.a2a_task_store is not None else ()),
            *(s for holder in user_data_holders(self.middlewares) for s in holder.user_stores()),
            *(("retrieval.documents",) if self.config.retrieval is not None else ()),
            *(("memory.memories",) if self.config.memory is not None else ()),
        )

    async def _records(self, user: str) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        for table in EXPORT_TABLES:
            page = _SESSION_PAGE if table == "agent.sessions" else _ROW_PAGE
            async for rows in self.store.export(user, table, page):
                for row in rows:
                    yield table, _row_record(table, row)
        if self.config.a2a_task_store is not None:
            sessions = await self.store.user_sessions(user)
            try:
                async for tasks in export_tasks(self.config.a2a_task_store, sessions):
                    for task in tasks:
                        yield "a2a.tasks", task
            except OSError as exc:
                raise unreachable("EXPORT", "a2a.tasks", str(exc), _LEFT) from None
        for holder in user_data_holders(self.middlewares):
            try:
                async for record in holder.export_user(user):
                    yield record
            except (OSError, ValueError) as exc:
                stores = ", ".join(holder.user_stores())
                raise failed_files("EXPORT", stores, exc, _LEFT) from None
        if self.config.retrieval is not None:
            async for document in self._documents(user):
                yield "retrieval.documents", _document_record(document)
        if self.config.memory is not None:
            async for memory in self._memories(user):
                yield "memory.memories", _memory_record(memory)

    async def _documents(self, user: str) -> AsyncIterator[StoredDocument]:
        assert self.config.retrieval is not None
        token = secret(self.config.retrieval_token_env)
        try:
            async with RetrievalClient(
                self.config.retrieval, timeout=_MEMORY_TIMEOUT, token=token, acting_for=user
            ) as retrieval:
                page_token = ""
                while True:
                    docs, page_token = await retrieval.list_user_documents(
                        page_size=_DOCUMENT_PAGE, page_token=page_token
                    )
                    for doc in docs:
                        yield doc
                    if not page_token:
                        return
        except AgentClientError as exc:
            raise failed_call("EXPORT", "retrieval.documents", exc, _LEFT) from None

    async def _memories(self, user: str) -> AsyncIterator[Memory]:
        assert self.config.memory is not None
        token = secret(self.config.memory_token_env)
        scope = MemoryScope(user_id=user)
        try:
            async with MemoryClient(self.config.memory, timeout=_MEMORY_TIMEOUT, token=token) as m:
                page_token = ""
                while True:
                    page = await m.list(scope, page_size=_MEMORY_PAGE, page_token=page_token)
                    for memory in page.memories:
                        yield memory
                    page_token = page.next_page_token
                    if not page_token:
                        return
        except AgentClientError as exc:
            raise failed_call("EXPORT", "memory.memories", exc, _LEFT) from None
