"""Erasure of one user on request: every store the agent service reaches, one receipt."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence

import grpc

from hookmesh.client import AgentClientError, MemoryClient, RetrievalClient
from hookmesh.errors import RequestError, SchemaError
from hookmesh.memory import MemoryScope
from hookmesh.middleware import HoldsUserData, Middleware
from hookmesh.services.a2a import forget_tasks
from hookmesh.services.agent._config import ErasureConfig, secret
from hookmesh.services.agent._store import SessionStore
from hookmesh.services.agent._store_reach import failed_call, failed_files, unreachable

log = logging.getLogger("hookmesh.agent_service")
audit = logging.getLogger("hookmesh.audit")
"""The audit log: one line per erasure, without content."""

_USER = re.compile(r"^[^\x00-\x1f\x7f]{1,128}$")
_MEMORY_TIMEOUT = 60.0
_LEFT = "what was erased stays"

Receipt = list[tuple[str, int]]
"""(store, rows or files deleted), in the order they were erased."""


Middlewares = Callable[[], Sequence[Middleware]]
"""The middlewares of the chain new replies take (read at each call: reloads swap it)."""


def user_data_holders(middlewares: Middlewares) -> list[HoldsUserData]:
    """The middlewares keeping stores per user (`HoldsUserData` with stores), in order."""
    return [m for m in middlewares() if isinstance(m, HoldsUserData) and m.user_stores()]


def check_user(user_id: str) -> str:
    """The user id, validated as every service names users.

    Raises:
        SchemaError: INVALID_ARGUMENT ``INVALID_USER_ID`` naming ``user_id``.
    """
    if not _USER.fullmatch(user_id):
        raise SchemaError.single(
            "user_id",
            "must be 1-128 characters without control characters",
            reason="INVALID_USER_ID",
        )
    return user_id


class UserEraser:
    """Erases a user from the session store and the stores `config` names.

    Args:
        store: The agent service's session store (shared by its replicas on PostgreSQL).
        config: Where the A2A tasks and the memory service are.
        middlewares: The current chain's middlewares; those that hold user data are erased.
    """

    def __init__(
        self, store: SessionStore, config: ErasureConfig, middlewares: Middlewares = list
    ) -> None:
        self.store = store
        self.config = config
        self.middlewares = middlewares

    async def forget(self, user_id: str, busy: bool, caller: str) -> Receipt:
        """Erase `user_id` everywhere; `busy` says a reply of the user runs in this process.

        Raises:
            RequestError: FAILED_PRECONDITION ``USER_REPLY_RUNNING`` (nothing erased);
                UNAVAILABLE ``ERASURE_STORE_UNAVAILABLE`` when a store named in the config
                cannot be reached (what was erased stays erased: call again).
        """
        user = check_user(user_id)
        if busy or await self.store.user_busy(user):
            raise RequestError(
                grpc.StatusCode.FAILED_PRECONDITION,
                "USER_REPLY_RUNNING",
                "a reply of this user is running: interrupt it, then forget the user again",
                metadata={"userId": user},
            )
        receipt: Receipt = []
        if self.config.a2a_task_store is not None:
            sessions = await self.store.user_sessions(user)
            try:
                receipt.append(
                    ("a2a.tasks", await forget_tasks(self.config.a2a_task_store, sessions))
                )
            except OSError as exc:
                raise unreachable("ERASURE", "a2a.tasks", str(exc), _LEFT) from None
        receipt += await self.store.forget(user)
        for holder in user_data_holders(self.middlewares):
            try:
                receipt += await holder.forget_user(user)
            except (OSError, ValueError) as exc:
                stores = ", ".join(holder.user_stores())
                raise failed_files("ERASURE", stores, exc, _LEFT) from None
        if self.config.retrieval is not None:
            receipt.append(("retrieval.documents", await self._forget_documents(user)))
        if self.config.memory is not None:
            receipt.append(("memory.memories", await self._forget_memories(user)))
        audit.warning(
            "forget user %r by %r: %s",
            user,
            caller,
            ", ".join(f"{store}={count}" for store, count in receipt),
        )
        return receipt

    async def _forget_documents(self, user: str) -> int:
        assert self.config.retrieval is not None
        token = secret(self.config.retrieval_token_env)
        try:
            async with RetrievalClient(
                self.config.retrieval, timeout=_MEMORY_TIMEOUT, token=token, acting_for=user
            ) as retrieval:
                return await retrieval.delete_user_documents()
        except AgentClientError as exc:
            raise failed_call("ERASURE", "retrieval.documents", exc, _LEFT) from None

    async def _forget_memories(self, user: str) -> int:
        assert self.config.memory is not None
        token = secret(self.config.memory_token_env)
        try:
            async with MemoryClient(self.config.memory, timeout=_MEMORY_TIMEOUT, token=token) as m:
                return await m.delete_all(MemoryScope(user_id=user))
        except AgentClientError as exc:
            raise failed_call("ERASURE", "memory.memories", exc, _LEFT) from None
