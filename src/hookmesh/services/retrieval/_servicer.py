"""RetrievalServicer: knowledge bases, streamed ingest and search over a `KnowledgeStore`."""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import AsyncIterator

import grpc

from hookmesh.errors import SchemaError
from hookmesh.retrieval import ChunkingOptions, KnowledgeStore, check_search_terms
from hookmesh.retrieval.codec import (
    MODE_FROM_PB,
    hit_to_pb,
    knowledge_base_to_pb,
    stored_document_to_pb,
    struct_to_dict,
)
from hookmesh.server import ANONYMOUS, current_user, store_rpc
from hookmesh.services.retrieval._access import AccessPolicy
from hookmesh.services.retrieval._config import RetrievalServiceConfig
from hookmesh.services.retrieval._ingest import Ingestion, rename_fields
from hookmesh.v1 import retrieval_pb2 as _pb
from hookmesh.v1 import retrieval_pb2_grpc as _grpc

log = logging.getLogger("hookmesh.retrieval_service")

DEFAULT_TOP_K = 5
"""Hits a search returns when the request says 0."""
DEFAULT_PAGE_SIZE = 20
"""Documents in a ListUserDocuments page when the request says 0."""
MAX_PAGE_SIZE = 100
_DEFAULT_CHUNKING = ChunkingOptions()
# The store names fields as a knowledge_base object; CreateKnowledgeBase has them top level.
_CREATE_FIELDS = {
    "knowledge_base.name": "name",
    "knowledge_base.description": "description",
    "knowledge_base.chunking": "chunking",
}
_rpc = store_rpc("knowledge store", log)


class RetrievalServicer(_grpc.RetrievalServiceServicer):
    """Serves one `KnowledgeStore` (which validates every request and owns the data).

    Args:
        store: The open store; the caller closes it after the server stops.
        config: Bounds on ingest streams.
    """

    def __init__(self, store: KnowledgeStore, config: RetrievalServiceConfig) -> None:
        self.store = store
        self.config = config
        self.access = AccessPolicy(config.access, ownership=config.ownership)

    @_rpc
    async def CreateKnowledgeBase(
        self, request: _pb.CreateKnowledgeBaseRequest, context: grpc.aio.ServicerContext
    ) -> _pb.CreateKnowledgeBaseResponse:
        max_tokens = request.chunking.max_tokens or _DEFAULT_CHUNKING.max_tokens
        overlap = request.chunking.overlap_tokens or min(
            _DEFAULT_CHUNKING.overlap_tokens, max(max_tokens, 0) // 2
        )
        chunking = ChunkingOptions(max_tokens, overlap)
        if not self.access.ownership:  # with ownership anyone may create a base of its own
            await self.access.check(self.store, request.name, "write")
        try:
            kb = await self.store.create_knowledge_base(
                request.name, request.description, chunking, owner=current_user()
            )
        except SchemaError as exc:
            raise rename_fields(exc, _CREATE_FIELDS) from None
        return _pb.CreateKnowledgeBaseResponse(knowledge_base=knowledge_base_to_pb(kb))

    @_rpc
    async def ListKnowledgeBases(
        self, request: _pb.ListKnowledgeBasesRequest, context: grpc.aio.ServicerContext
    ) -> _pb.ListKnowledgeBasesResponse:
        kbs = self.access.readable(await self.store.list_knowledge_bases())
        return _pb.ListKnowledgeBasesResponse(
            knowledge_bases=[knowledge_base_to_pb(kb) for kb in kbs]
        )

    @_rpc
    async def DeleteKnowledgeBase(
        self, request: _pb.DeleteKnowledgeBaseRequest, context: grpc.aio.ServicerContext
    ) -> _pb.DeleteKnowledgeBaseResponse:
        await self.access.check(self.store, request.name, "write")
        await self.store.delete_knowledge_base(request.name)
        return _pb.DeleteKnowledgeBaseResponse()

    @_rpc
    async def Ingest(
        self,
        request_iterator: AsyncIterator[_pb.IngestRequest],
        context: grpc.aio.ServicerContext,
    ) -> _pb.IngestResponse:
        ingestion = Ingestion(self.store, self.config, self.access, owner=current_user())
        try:
            return await ingestion.run(request_iterator)
        except Exception as exc:
            log.info(
                "ingest into %r stopped after %d documents: %s",
                ingestion.knowledge_base,
                ingestion.received,
                exc,
            )
            raise

    @_rpc
    async def Search(
        self, request: _pb.SearchRequest, context: grpc.aio.ServicerContext
    ) -> _pb.SearchResponse:
        mode = MODE_FROM_PB.get(request.mode)
        if mode is None:
            raise SchemaError.single("mode", f"unknown search mode {request.mode}")
        names = list(request.knowledge_bases)
        for name in names:
            await self.access.check(self.store, name, "read")
        if not names:
            readable = self.access.readable(await self.store.list_knowledge_bases())
            names = [kb.name for kb in readable]
            if not names:  # nothing to search, but bad terms are refused all the same
                check_search_terms(
                    request.query,
                    mode,
                    request.top_k or DEFAULT_TOP_K,
                    request.score_threshold or None,
                    self.store.limits,
                )
                return _pb.SearchResponse()
        hits = await self.store.search(
            request.query,
            names,
            mode=mode,
            top_k=request.top_k or DEFAULT_TOP_K,
            score_threshold=request.score_threshold or None,
            metadata_filter=struct_to_dict(request.metadata_filter, "metadata_filter"),
        )
        return _pb.SearchResponse(hits=[hit_to_pb(hit) for hit in hits])

    @_rpc
    async def GetDocument(
        self, request: _pb.GetDocumentRequest, context: grpc.aio.ServicerContext
    ) -> _pb.GetDocumentResponse:
        await self.access.check(self.store, request.knowledge_base, "read")
        doc = await self.store.get_document(request.knowledge_base, request.document_id)
        return stored_document_to_pb(doc)

    @_rpc
    async def DeleteDocument(
        self, request: _pb.DeleteDocumentRequest, context: grpc.aio.ServicerContext
    ) -> _pb.DeleteDocumentResponse:
        await self.access.check(self.store, request.knowledge_base, "write")
        await self.store.delete_document(request.knowledge_base, request.document_id)
        return _pb.DeleteDocumentResponse()

    @_rpc
    async def ListUserDocuments(
        self, request: _pb.ListUserDocumentsRequest, context: grpc.aio.ServicerContext
    ) -> _pb.ListUserDocumentsResponse:
        size = request.page_size or DEFAULT_PAGE_SIZE
        if not 1 <= size <= MAX_PAGE_SIZE:
            raise SchemaError.single("page_size", f"must be 0-{MAX_PAGE_SIZE}")
        after = _cursor(request.page_token) if request.page_token else None
        user = current_user()
        if user == ANONYMOUS:  # no credentials checked: nothing is anyone's (see the proto)
            return _pb.ListUserDocumentsResponse()
        docs, following = await self.store.owned_page(user, size, after)
        return _pb.ListUserDocumentsResponse(
            documents=[
                _pb.UserDocument(knowledge_base=d.knowledge_base, stored=stored_document_to_pb(d))
                for d in docs
            ],
            next_page_token=_token(following) if following else "",
        )

    @_rpc
    async def DeleteUserDocuments(
        self, request: _pb.DeleteUserDocumentsRequest, context: grpc.aio.ServicerContext
    ) -> _pb.DeleteUserDocumentsResponse:
        user = current_user()
        if user == ANONYMOUS:  # no credentials checked: nothing is anyone's (see the proto)
            return _pb.DeleteUserDocumentsResponse()
        deleted = await self.store.forget_owner(user)
        log.info("deleted %d documents of one user", deleted)
        return _pb.DeleteUserDocumentsResponse(deleted_count=deleted)


def _token(cursor: tuple[str, str]) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(cursor)).encode()).decode()


def _cursor(token: str) -> tuple[str, str]:
    """A ListUserDocuments page token read back.

    Raises:
        SchemaError: INVALID_ARGUMENT naming ``page_token``.
    """
    try:
        base, document = json.loads(base64.urlsafe_b64decode(token.encode()))
        if isinstance(base, str) and isinstance(document, str):
            return base, document
    except (ValueError, TypeError, binascii.Error):
        pass
    raise SchemaError.single("page_token", "is not a token a previous page returned")
