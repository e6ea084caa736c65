"""Which principal may read or write which knowledge bases."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal

import grpc
from pydantic import BaseModel, ConfigDict, Field

from hookmesh.errors import RequestError
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
    """Grants by principal. No grants at all: everyone may do everything (the default, for
    one-user and loopback deployments); with grants, an unlisted principal may do nothing.

    Args:
        grants: Principal (the caller's user, ``anonymous`` without authentication) → grant.
    """

    def __init__(self, grants: Mapping[str, KnowledgeBaseGrant]) -> None:
        self._grants = dict(grants)

    def allows(self, name: str, operation: Operation) -> bool:
        """Whether the current caller may do `operation` on knowledge base `name`."""
        if not self._grants:
            return True
        grant = self._grants.get(current_user())
        if grant is None:
            return False
        names = grant.write if operation == "write" else [*grant.read, *grant.write]
        return "*" in names or name in names

    def check(self, name: str, operation: Operation) -> None:
        """Refuse an operation the current caller is not granted.

        Raises:
            RequestError: PERMISSION_DENIED, reason ``KNOWLEDGE_BASE_NOT_GRANTED``.
        """
        if not self.allows(name, operation):
            raise RequestError(
                grpc.StatusCode.PERMISSION_DENIED,
                "KNOWLEDGE_BASE_NOT_GRANTED",
                f"this caller may not {operation} knowledge base {name[:64]!r}",
                metadata={"knowledgeBase": name[:64], "operation": operation},
            )

    def readable(self, names: Iterable[str]) -> list[str]:
        """The names among `names` the current caller may read."""
        return [n for n in names if self.allows(n, "read")]
