"""Which principal may read or write which knowledge bases: grants by name, and with
ownership on, the base's owner."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal

import grpc
from pydantic import BaseModel, ConfigDict, Field

from hookmesh.errors import RequestError, SchemaError
from hookmesh.retrieval import KnowledgeBase, KnowledgeStore
from hookmesh.server import current_user

Operation = Literal["read", "write"]


class KnowledgeBaseGrant(BaseModel):
    """What one principal may do; names are knowledge bases, ``*`` is every one."""

    model_config = ConfigDict(extra="forbid")

    read: list[str] = Field(default_factory=list)
    """Bases it may search, list and read documents of."""
    write: list[str] = Field(default_factory=list)
    """Bases it may create, delete, ingest into and delete documents of (write implies
    read)."""


class AccessPolicy:
    """Who may use a base.

    Ownership off (the default): no grants at all lets everyone do everything (one-user and
    loopback deployments); with grants, an unlisted principal may do nothing. Ownership on
    (`hookmesh up --token-env` turns it on): any caller may create a base, which is then its
    own; a base is used by its owner and by principals granted it (shared bases are shared
    by grant, bases without an owner only by grant). A base the caller may not use is
    refused the same way whether it exists or not, so names cannot be probed.

    Args:
        grants: Principal (the caller's user, ``anonymous`` without authentication) → grant.
        ownership: Whether a base's owner may use it without a grant.
    """

    def __init__(self, grants: Mapping[str, KnowledgeBaseGrant], *, ownership: bool) -> None:
        self._grants = dict(grants)
        self.ownership = ownership

    def allows(self, name: str, operation: Operation, owner: str = "") -> bool:
        """Whether the current caller may do `operation` on base `name`, owned by `owner`."""
        user = current_user()
        if self.ownership and owner and owner == user:
            return True
        if not self._grants and not self.ownership:
            return True
        grant = self._grants.get(user)
        if grant is None:
            return False
        names = grant.write if operation == "write" else [*grant.read, *grant.write]
        return "*" in names or name in names

    async def check(self, store: KnowledgeStore, name: str, operation: Operation) -> None:
        """Refuse an operation the current caller may not do (with ownership on, the base's
        owner is read from `store`; a base that does not exist has none).

        Raises:
            RequestError: PERMISSION_DENIED, reason ``KNOWLEDGE_BASE_NOT_GRANTED``.
        """
        owner = ""
        if self.ownership:
            try:
                owner = (await store.get_knowledge_base(name)).owner
            except SchemaError:
                pass  # a malformed name has no owner; the store names the field if granted
            except RequestError as exc:
                if exc.reason != "KNOWLEDGE_BASE_NOT_FOUND":
                    raise
        if not self.allows(name, operation, owner):
            raise RequestError(
                grpc.StatusCode.PERMISSION_DENIED,
                "KNOWLEDGE_BASE_NOT_GRANTED",
                f"this caller may not {operation} knowledge base {name[:64]!r}",
                metadata={"knowledgeBase": name[:64], "operation": operation},
            )

    def readable(self, bases: Iterable[KnowledgeBase]) -> list[KnowledgeBase]:
        """The bases among `bases` the current caller may read."""
        return [kb for kb in bases if self.allows(kb.name, "read", kb.owner)]
