"""MemoryServicer: the MemoryService RPCs over a `MemoryStore`."""

from __future__ import annotations

import dataclasses
import logging

import grpc

from hookmesh.errors import SchemaError
from hookmesh.memory import MemoryScope, MemoryStore
from hookmesh.memory.codec import (
    add_result_to_pb,
    hit_to_pb,
    memory_to_pb,
    metadata_of,
    scope_from_pb,
)
from hookmesh.schema import messages_from_proto
from hookmesh.server import scoped_user, store_rpc
from hookmesh.v1 import memory_pb2 as _pb
from hookmesh.v1 import memory_pb2_grpc as _grpc

log = logging.getLogger("hookmesh.memory_service")
_rpc = store_rpc("memory store", log)


def _scope(pb: _pb.MemoryScope) -> MemoryScope:
    """The request's scope, its user checked against the caller (docs/security.md)."""
    scope = scope_from_pb(pb)
    return dataclasses.replace(scope, user_id=scoped_user(scope.user_id, "scope.user_id"))


class MemoryServicer(_grpc.MemoryServiceServicer):
    """Serves one `MemoryStore`, which validates every request and owns the data. With
    authentication, a caller reads and writes only its own user's memories (`scoped_user`).

    Args:
        store: The open store; the caller closes it after the server stops.
        max_request_bytes: Largest AddMemories request (``REQUEST_TOO_LARGE`` beyond).
    """

    def __init__(self, store: MemoryStore, max_request_bytes: int) -> None:
        self.store = store
        self.max_request_bytes = max_request_bytes

    @_rpc
    async def AddMemories(
        self, request: _pb.AddMemoriesRequest, context: grpc.aio.ServicerContext
    ) -> _pb.AddMemoriesResponse:
        size = request.ByteSize()
        if size > self.max_request_bytes:
            raise SchemaError.single(
                "messages" if request.messages else "facts",
                f"the request is {size} bytes; the limit is {self.max_request_bytes}",
                reason="REQUEST_TOO_LARGE",
            )
        result = await self.store.add(
            _scope(request.scope),
            facts=list(request.facts),
            messages=messages_from_proto(request.messages, "messages"),
            metadata=metadata_of(request.metadata) if request.HasField("metadata") else None,
        )
        return add_result_to_pb(result)

    @_rpc
    async def SearchMemories(
        self, request: _pb.SearchMemoriesRequest, context: grpc.aio.ServicerContext
    ) -> _pb.SearchMemoriesResponse:
        hits = await self.store.search(
            request.query,
            _scope(request.scope),
            top_k=request.top_k,
            score_threshold=request.score_threshold,
        )
        return _pb.SearchMemoriesResponse(hits=[hit_to_pb(h) for h in hits])

    @_rpc
    async def ListMemories(
        self, request: _pb.ListMemoriesRequest, context: grpc.aio.ServicerContext
    ) -> _pb.ListMemoriesResponse:
        page = await self.store.list(
            _scope(request.scope),
            page_size=request.page_size,
            page_token=request.page_token,
        )
        return _pb.ListMemoriesResponse(
            memories=[memory_to_pb(m) for m in page.memories],
            next_page_token=page.next_page_token,
        )

    @_rpc
    async def GetMemory(
        self, request: _pb.GetMemoryRequest, context: grpc.aio.ServicerContext
    ) -> _pb.GetMemoryResponse:
        memory = await self.store.get(scoped_user(request.user_id, "user_id"), request.memory_id)
        return _pb.GetMemoryResponse(memory=memory_to_pb(memory))

    @_rpc
    async def UpdateMemory(
        self, request: _pb.UpdateMemoryRequest, context: grpc.aio.ServicerContext
    ) -> _pb.UpdateMemoryResponse:
        memory = await self.store.update(
            scoped_user(request.user_id, "user_id"),
            request.memory_id,
            text=request.text if request.HasField("text") else None,
            metadata=metadata_of(request.metadata) if request.HasField("metadata") else None,
        )
        return _pb.UpdateMemoryResponse(memory=memory_to_pb(memory))

    @_rpc
    async def DeleteMemory(
        self, request: _pb.DeleteMemoryRequest, context: grpc.aio.ServicerContext
    ) -> _pb.DeleteMemoryResponse:
        await self.store.delete(scoped_user(request.user_id, "user_id"), request.memory_id)
        return _pb.DeleteMemoryResponse()

    @_rpc
    async def DeleteAllMemories(
        self, request: _pb.DeleteAllMemoriesRequest, context: grpc.aio.ServicerContext
    ) -> _pb.DeleteAllMemoriesResponse:
        count = await self.store.delete_all(_scope(request.scope))
        return _pb.DeleteAllMemoriesResponse(deleted_count=count)
