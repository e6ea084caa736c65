"""Middlewares that keep a user's data in stores of their own (files beside the agent), so
the agent service's erasure and export on request reach them too (docs/security.md, "Data
lifecycle")."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

UserRecord = tuple[str, dict[str, Any]]
"""(store, one record as JSON data), as an export hands it over."""


@runtime_checkable
class HoldsUserData(Protocol):
    """A local middleware whose stores are keyed by the reply's user (`AgentView.user_id`).

    The agent service calls these on every middleware of its current chain that has them,
    after its own stores: `AdminService.ForgetUser` calls `forget_user` and lists each
    (store, count) in its receipt; `ExportUser` streams what `export_user` yields. Both may
    be called while other users' replies run, and must be idempotent.
    """

    def user_stores(self) -> tuple[str, ...]:
        """The stores it keeps per user (``file_memory.files``, ``offload.files``); empty
        when configured so that nothing is keyed by user (then nothing is reached)."""
        ...

    async def forget_user(self, user_id: str) -> list[tuple[str, int]]:
        """Delete what it keeps of `user_id`; (store, files or rows deleted) per store."""
        ...

    def export_user(self, user_id: str) -> AsyncIterator[UserRecord]:
        """What it keeps of `user_id`, record by record, store by store."""
        ...


@runtime_checkable
class ExpiresData(Protocol):
    """A local middleware whose stores have a retention of their own (files older than it
    configures). The agent service calls `expire` at start and every
    `sessions.sweep_interval_seconds` on every middleware of its current chain that has it,
    in rounds until one deletes fewer than `limit`."""

    async def expire(self, now: datetime, limit: int) -> int:
        """Delete at most `limit` items older than the retention at `now` (none without
        one); how many."""
        ...


def user_folder(user_id: str) -> str:
    """The folder name keeping one user's files: ``user-`` and 32 hexadecimal digits of the
    id's SHA-256, so a path names no user, no id can escape its folder, and no two ids
    share one."""
    return "user-" + hashlib.sha256(user_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]
