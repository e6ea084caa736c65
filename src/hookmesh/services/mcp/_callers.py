"""Who calls the MCP server, and the service clients that act for them (the caller's own token
is passed on, so every service applies its own rules for that principal)."""

from __future__ import annotations

import asyncio
import hmac
import os
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken

from hookmesh.client import MemoryClient, RetrievalClient, TTSClient
from hookmesh.server import AuthConfig, load_tokens
from hookmesh.services.mcp._config import McpServerSettings

_MAX_CALLERS = 64
"""Callers whose service clients are kept open (least recently used ones are closed)."""


class HookmeshTokenVerifier:
    """The MCP SDK's token check over hookmesh's tokens (``auth.token_env`` / ``token_file``):
    a valid token's principal is the access token's ``client_id``. Constant-time compares."""

    def __init__(self, config: AuthConfig) -> None:
        self._tokens = [(t.encode(), p) for t, p in load_tokens(config).items()]

    async def verify_token(self, token: str) -> AccessToken | None:
        given = token.encode()
        found = None
        for expected, principal in self._tokens:
            if hmac.compare_digest(given, expected):
                found = principal
        if found is None:
            return None
        return AccessToken(token=token, client_id=found, scopes=[])


@dataclass(frozen=True)
class Caller:
    """Whom a tool call acts for, and the token it is made with."""

    user: str
    """The principal: the memory scope's user."""
    token: str | None
    """Sent to the services (a secret)."""


def current_caller(settings: McpServerSettings) -> Caller:
    """The HTTP caller the SDK authenticated, or else the configured `user` (stdio, or HTTP
    without tokens)."""
    access = get_access_token()
    if access is not None:
        return Caller(access.client_id, access.token)
    token = os.environ.get(settings.token_env) if settings.token_env else None
    return Caller(settings.user, token)


@dataclass
class Clients:
    """One caller's service clients (None: the service is not configured)."""

    retrieval: RetrievalClient | None
    memory: MemoryClient | None
    tts: TTSClient | None

    async def close(self) -> None:
        for client in (self.retrieval, self.memory, self.tts):
            if client is not None:
                await client.close()


class ClientPool:
    """Service clients per caller token, the most recent `_MAX_CALLERS` kept open."""

    def __init__(self, settings: McpServerSettings) -> None:
        self._settings = settings
        self._open: OrderedDict[str | None, Clients] = OrderedDict()
        self._lock = asyncio.Lock()

    async def for_caller(self, caller: Caller) -> Clients:
        async with self._lock:
            clients = self._open.get(caller.token)
            if clients is not None:
                self._open.move_to_end(caller.token)
                return clients
            clients = self._new(caller.token)
            self._open[caller.token] = clients
            while len(self._open) > _MAX_CALLERS:
                _, old = self._open.popitem(last=False)
                await old.close()
            return clients

    def _new(self, token: str | None) -> Clients:
        s = self._settings
        common: dict[str, Any] = {"timeout": s.timeout, "token": token}
        return Clients(
            retrieval=RetrievalClient(s.retrieval, **common) if s.retrieval else None,
            memory=MemoryClient(s.memory, **common) if s.memory else None,
            tts=TTSClient(s.tts, **common) if s.tts else None,
        )

    async def close(self) -> None:
        async with self._lock:
            while self._open:
                _, clients = self._open.popitem()
                await clients.close()
