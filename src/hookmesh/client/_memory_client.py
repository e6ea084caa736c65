"""Python client of the MemoryService: `MemoryClient` (asyncio), the `Memories` interface
over gRPC."""

from __future__ import annotations

from collections.abc import Sequence

from hookmesh._security import ClientTLS
from hookmesh.client._base import ServiceClient
from hookmesh.memory import AddResult, Memory, MemoryHit, MemoryMetadata, MemoryPage, MemoryScope
from hookmesh.memory.codec import (
    add_result_from_pb,
    hit_from_pb,
    memory_from_pb,
    scope_to_pb,
    struct_of,
)
from hookmesh.schema import Message, message_to_proto
from hookmesh.v1 import memory_pb2 as _pb
from hookmesh.v1 import memory_pb2_grpc as _grpc

DEFAULT_MEMORY_TIMEOUT = 30.0
"""Seconds any memory call may take (an add with extraction waits for the model)."""

# NOTE(memory): reads and single-memory writes are idempotent, so gRPC may retry them on
# UNAVAILABLE (a restarting service); AddMemories is not (it would add twice), nor is
# DeleteAllMemories worth retrying blindly.
_RETRY_CONFIG = (
    '{"methodConfig": [{"name": ['
    '{"service": "hookmesh.v1.MemoryService", "method": "SearchMemories"},'
    '{"service": "hookmesh.v1.MemoryService", "method": "ListMemories"},'
    '{"service": "hookmesh.v1.MemoryService", "method": "GetMemory"},'
    '{"service": "hookmesh.v1.MemoryService", "method": "UpdateMemory"},'
    '{"service": "hookmesh.v1.MemoryService", "method": "DeleteMemory"}],'
    '"retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.1s", "maxBackoff": "1s",'
    '"backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]}'
)


class MemoryClient(ServiceClient):
    """Asyncio client of a MemoryService, with the same methods as `MemoryStore`.

    Use as ``async with MemoryClient("127.0.0.1:7004") as memory:``. Every call has a
    deadline (`timeout`, overridable per call). Idempotent calls are retried on UNAVAILABLE
    by the channel's service config. Failed calls raise `AgentClientError` (gRPC code,
    stable reason such as ``MEMORY_NOT_FOUND``, field violations).

    Args:
        target: ``host:port`` of the service.
        timeout: Default deadline in seconds for each call.
        tls: TLS settings; plaintext when None.
        token: Bearer token to send (a secret).
    """

    def __init__(
        self,
        target: str,
        *,
        timeout: float = DEFAULT_MEMORY_TIMEOUT,
        tls: ClientTLS | None = None,
        token: str | None = None,
    ) -> None:
        super().__init__(
            target,
            timeout=timeout,
            tls=tls,
            token=token,
            options=[("grpc.service_config", _RETRY_CONFIG)],
        )
        self._stub = _grpc.MemoryServiceStub(self._channel)

    async def add(
        self,
        scope: MemoryScope,
        *,
        facts: Sequence[str] = (),
        messages: Sequence[Message] = (),
        metadata: MemoryMetadata | None = None,
        timeout: float | None = None,
    ) -> AddResult:
        """Store facts, or facts extracted from messages (exactly one of the two)."""
        request = _pb.AddMemoriesRequest(
            scope=scope_to_pb(scope),
            facts=list(facts),
            messages=[message_to_proto(m) for m in messages],
        )
        if metadata is not None:
            request.metadata.CopyFrom(struct_of(metadata))
        response = await self._unary(self._stub.AddMemories, request, timeout)
        return add_result_from_pb(response)

    async def search(
        self,
        query: str,
        scope: MemoryScope,
        *,
        top_k: int = 5,
        score_threshold: float = 0.0,
        timeout: float | None = None,
    ) -> list[MemoryHit]:
        """The scope's memories best matching `query`, best first."""
        request = _pb.SearchMemoriesRequest(
            query=query, scope=scope_to_pb(scope), top_k=top_k, score_threshold=score_threshold
        )
        response = await self._unary(self._stub.SearchMemories, request, timeout)
        return [hit_from_pb(h) for h in response.hits]

    async def get(self, user_id: str, memory_id: str, *, timeout: float | None = None) -> Memory:
        """One memory of `user_id`."""
        request = _pb.GetMemoryRequest(user_id=user_id, memory_id=memory_id)
        response = await self._unary(self._stub.GetMemory, request, timeout)
        return memory_from_pb(response.memory)

    async def update(
        self,
        user_id: str,
        memory_id: str,
        *,
        text: str | None = None,
        metadata: MemoryMetadata | None = None,
        timeout: float | None = None,
    ) -> Memory:
        """Change a memory's text, metadata or both."""
        request = _pb.UpdateMemoryRequest(user_id=user_id, memory_id=memory_id)
        if text is not None:
            request.text = text
        if metadata is not None:
            request.metadata.CopyFrom(struct_of(metadata))
        response = await self._unary(self._stub.UpdateMemory, request, timeout)
        return memory_from_pb(response.memory)

    async def delete(self, user_id: str, memory_id: str, *, timeout: float | None = None) -> None:
        """Delete one memory."""
        request = _pb.DeleteMemoryRequest(user_id=user_id, memory_id=memory_id)
        await self._unary(self._stub.DeleteMemory, request, timeout)

    async def delete_all(self, scope: MemoryScope, *, timeout: float | None = None) -> int:
        """Delete every memory of the scope; returns how many."""
        request = _pb.DeleteAllMemoriesRequest(scope=scope_to_pb(scope))
        response = await self._unary(self._stub.DeleteAllMemories, request, timeout)
        return int(response.deleted_count)

    async def list(
        self,
        scope: MemoryScope,
        *,
        page_size: int = 50,
        page_token: str = "",
        timeout: float | None = None,
    ) -> MemoryPage:
        """One page of the scope's memories, oldest first."""
        request = _pb.ListMemoriesRequest(
            scope=scope_to_pb(scope), page_size=page_size, page_token=page_token
        )
        response = await self._unary(self._stub.ListMemories, request, timeout)
        return MemoryPage([memory_from_pb(m) for m in response.memories], response.next_page_token)
