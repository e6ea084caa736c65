"""What every asyncio service client shares: one channel, a default deadline, a token."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Self

import grpc

from hookmesh._security import ClientTLS, open_channel
from hookmesh.client._errors import AgentClientError
from hookmesh.server import USER_HEADER


class ServiceClient:
    """A channel to one service with its default deadline and bearer token.

    Args:
        target: ``host:port`` of the service.
        timeout: Default deadline in seconds of each call.
        tls: TLS settings; plaintext when None.
        token: Bearer token to send (a secret).
        options: Extra channel options (e.g. a retry service config).
    """

    def __init__(
        self,
        target: str,
        *,
        timeout: float,
        tls: ClientTLS | None = None,
        token: str | None = None,
        options: Sequence[tuple[str, Any]] = (),
    ) -> None:
        self.target = target
        self.timeout = timeout
        self._channel = open_channel(target, tls, options)
        self._metadata: tuple[tuple[str, str], ...] = (
            (("authorization", f"Bearer {token}"),) if token else ()
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *unused_exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the channel (cancelling calls in flight)."""
        await self._channel.close()

    async def wait_ready(self, timeout: float) -> None:
        """Wait until the channel is connected."""
        async with asyncio.timeout(timeout):
            await self._channel.channel_ready()

    async def _unary(
        self, method: Any, request: Any, timeout: float | None = None, *, user: str = ""
    ) -> Any:
        """Call a unary RPC with the deadline and token, acting for `user` when one is named
        (the ``x-hookmesh-user`` header a trusted gateway sends); failures raise
        AgentClientError."""
        metadata = (*self._metadata, (USER_HEADER, user)) if user else self._metadata
        try:
            return await method(request, timeout=timeout or self.timeout, metadata=metadata)
        except grpc.aio.AioRpcError as exc:
            raise AgentClientError.from_rpc_error(exc) from None
