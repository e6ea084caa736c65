"""Python client of the RetrievalService: `RetrievalClient` (asyncio)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import grpc

from hookmesh._security import ClientTLS
from hookmesh.client._base import ServiceClient
from hookmesh.client._errors import AgentClientError
from hookmesh.retrieval import (
    Document,
    Hit,
    KnowledgeBase,
    MetadataValue,
    SearchMode,
    StoredDocument,
)
from hookmesh.retrieval.codec import (
    MODE_TO_PB,
    dict_to_struct,
    document_to_pb,
    hit_from_pb,
    knowledge_base_from_pb,
    stored_document_from_pb,
)
from hookmesh.v1 import retrieval_pb2 as _pb
from hookmesh.v1 import retrieval_pb2_grpc as _grpc

DEFAULT_RETRIEVAL_TIMEOUT = 30.0
"""Seconds any call but Ingest may take."""
DEFAULT_INGEST_TIMEOUT = 600.0
"""Seconds one Ingest call (the whole stream) may take."""

_SERVICE = _pb.DESCRIPTOR.services_by_name["RetrievalService"].full_name
# NOTE(hookmesh): transparent retries of the read-only calls while the service restarts;
# writes are never retried by the channel (the caller re-sends: ingest is idempotent by id).
_SERVICE_CONFIG = json.dumps(
    {
        "methodConfig": [
            {
                "name": [
                    {"service": _SERVICE, "method": m}
                    for m in ("Search", "ListKnowledgeBases", "GetDocument")
                ],
                "retryPolicy": {
                    "maxAttempts": 3,
                    "initialBackoff": "0.1s",
                    "maxBackoff": "1s",
                    "backoffMultiplier": 2,
                    "retryableStatusCodes": ["UNAVAILABLE"],
                },
            }
        ]
    }
)
_CHANNEL_OPTIONS = [("grpc.enable_retries", 1), ("grpc.service_config", _SERVICE_CONFIG)]


@dataclass(frozen=True, slots=True)
class DocumentError:
    """A document an ingest did not store."""

    document_id: str
    """Its id as sent."""
    index: int
    """Its position in the documents passed (0-based)."""
    reason: str
    """Stable reason: ``DOCUMENT_TOO_LARGE``, ``INVALID_SCHEMA``."""
    message: str
    """What is wrong."""


@dataclass(frozen=True, slots=True)
class IngestReport:
    """What one ingest call did. Every id in `ingested_ids` is durably stored."""

    received_count: int
    """Documents the service received."""
    ingested_count: int
    """Documents stored (created, replaced, updated or already identical)."""
    unchanged_count: int
    """Of those, documents already stored exactly so."""
    chunk_count: int
    """Chunks written."""
    ingested_ids: list[str] = field(default_factory=list)
    """Ids of the stored documents, in the order sent."""
    errors: list[DocumentError] = field(default_factory=list)
    """Documents not stored, and why."""


def _report(pb: _pb.IngestResponse) -> IngestReport:
    return IngestReport(
        received_count=pb.received_count,
        ingested_count=pb.ingested_count,
        unchanged_count=pb.unchanged_count,
        chunk_count=pb.chunk_count,
        ingested_ids=list(pb.ingested_ids),
        errors=[DocumentError(e.document_id, e.index, e.reason, e.message) for e in pb.errors],
    )


class _Stopped(Exception):
    """The ingest was abandoned (its awaiting task cancelled): ends the request stream."""


async def _until(
    stop: asyncio.Event, documents: AsyncIterable[Document] | Iterable[Document]
) -> AsyncIterator[Document]:
    """`documents`, ended by `_Stopped` as soon as `stop` is set, even while the source
    is waiting for its next document."""
    if not isinstance(documents, AsyncIterable):
        for doc in documents:
            if stop.is_set():
                raise _Stopped
            yield doc
        return
    source = aiter(documents)
    stopped = asyncio.ensure_future(stop.wait())
    try:
        while True:
            following = asyncio.ensure_future(anext(source))
            await asyncio.wait((following, stopped), return_when=asyncio.FIRST_COMPLETED)
            if not following.done():
                following.cancel()
                await asyncio.gather(following, return_exceptions=True)
                raise _Stopped
            try:
                doc = following.result()
            except StopAsyncIteration:
                return
            yield doc
    finally:
        stopped.cancel()
        aclose = getattr(source, "aclose", None)
        if aclose is not None:
            await aclose()


class RetrievalClient(ServiceClient):
    """Asyncio client of a RetrievalService, with the `KnowledgeStore` search signature.

    Use as ``async with RetrievalClient("127.0.0.1:7002") as kb:``. Every call has a deadline
    (`timeout`; `ingest_timeout` for a whole Ingest stream; both overridable per call).
    Search, list and get are retried on UNAVAILABLE by the channel's service config. Failed
    calls raise `AgentClientError` (code, stable reason, field violations).

    Args:
        target: ``host:port`` of the service.
        timeout: Default deadline in seconds for each call but Ingest.
        ingest_timeout: Default deadline in seconds for one Ingest call.
        tls: TLS settings; plaintext when None.
        token: Bearer token to send (a secret).
        acting_for: The end user every call acts for (the ``x-hookmesh-user`` header), for
            a caller the service lists in its `trusted_gateways`; None: the token's own.
    """

    def __init__(
        self,
        target: str,
        *,
        timeout: float = DEFAULT_RETRIEVAL_TIMEOUT,
        ingest_timeout: float = DEFAULT_INGEST_TIMEOUT,
        tls: ClientTLS | None = None,
        token: str | None = None,
        acting_for: str | None = None,
    ) -> None:
        super().__init__(target, timeout=timeout, tls=tls, token=token, options=_CHANNEL_OPTIONS)
        if acting_for is not None:
            self._metadata += (("x-hookmesh-user", acting_for),)
        self.ingest_timeout = ingest_timeout
        self._stub = _grpc.RetrievalServiceStub(self._channel)

    async def create_knowledge_base(
        self,
        name: str,
        description: str = "",
        *,
        max_tokens: int = 0,
        overlap_tokens: int = 0,
        timeout: float | None = None,
    ) -> KnowledgeBase:
        """Create an empty knowledge base.

        Args:
            name: 1-63 of ``a-z 0-9 _ -``, starting with a letter.
            description: What it holds (at most 1024 characters).
            max_tokens: Most tokens per chunk (8-254); 0 for the default (128).
            overlap_tokens: Overlap between chunks; 0 for the default (32).
            timeout: Deadline in seconds; the client's default when None.

        Raises:
            AgentClientError: ``INVALID_SCHEMA`` (bad name, description or chunking),
                ``KNOWLEDGE_BASE_EXISTS``, or the call failed.
        """
        request = _pb.CreateKnowledgeBaseRequest(
            name=name,
            description=description,
            chunking=_pb.ChunkingOptions(max_tokens=max_tokens, overlap_tokens=overlap_tokens),
        )
        response = await self._unary(self._stub.CreateKnowledgeBase, request, timeout)
        return knowledge_base_from_pb(response.knowledge_base)

    async def list_knowledge_bases(self, *, timeout: float | None = None) -> list[KnowledgeBase]:
        """Every knowledge base, by name, with its document and chunk counts."""
        response = await self._unary(
            self._stub.ListKnowledgeBases, _pb.ListKnowledgeBasesRequest(), timeout
        )
        return [knowledge_base_from_pb(kb) for kb in response.knowledge_bases]

    async def delete_knowledge_base(self, name: str, *, timeout: float | None = None) -> None:
        """Delete a knowledge base and everything in it.

        Raises:
            AgentClientError: ``KNOWLEDGE_BASE_NOT_FOUND``, or the call failed.
        """
        await self._unary(
            self._stub.DeleteKnowledgeBase, _pb.DeleteKnowledgeBaseRequest(name=name), timeout
        )

    async def ingest(
        self,
        knowledge_base: str,
        documents: AsyncIterable[Document] | Iterable[Document],
        *,
        timeout: float | None = None,
    ) -> IngestReport:
        """Stream `documents` into a knowledge base in one Ingest call.

        Documents are sent as they are produced; the service commits them in batches and
        answers once all are committed. A document that fails (too large, bad id or
        metadata) is reported in `IngestReport.errors` and does not stop the others. Every
        id in the report is durable. Re-sending is safe: ingest is idempotent by id.

        Args:
            knowledge_base: The base to ingest into.
            documents: Any (async) iterable of documents; a ``title`` metadata string is
                shown as the document's title.
            timeout: Deadline for the whole stream; `ingest_timeout` when None.

        Raises:
            AgentClientError: The stream was refused (``KNOWLEDGE_BASE_NOT_FOUND``,
                ``TOO_MANY_DOCUMENTS``...) or failed; documents committed before it are
                stored but not acknowledged.
            Exception: Whatever iterating `documents` raised (the call is cancelled).
        """
        failure: list[BaseException] = []
        stop = asyncio.Event()

        async def requests() -> AsyncIterator[_pb.IngestRequest]:
            try:
                async for doc in _until(stop, documents):
                    yield _pb.IngestRequest(
                        knowledge_base=knowledge_base, document=document_to_pb(doc)
                    )
            except _Stopped:
                raise
            except Exception as exc:
                failure.append(exc)
                raise

        call = self._stub.Ingest(
            requests(), timeout=timeout or self.ingest_timeout, metadata=self._metadata
        )
        try:
            response = await call
        except (grpc.aio.AioRpcError, asyncio.CancelledError) as exc:
            if failure:
                raise failure[0] from None
            if isinstance(exc, asyncio.CancelledError):
                raise
            raise AgentClientError.from_rpc_error(exc) from None
        finally:
            # NOTE(hookmesh): through client interceptors, cancelling the awaiting task does
            # not cancel the underlying call; a request stream that raises does, so a cancel
            # reaches the service instead of leaving the stream open.
            stop.set()
            call.cancel()
        return _report(response)

    async def search(
        self,
        query: str,
        knowledge_bases: Sequence[str] = (),
        *,
        mode: SearchMode = "hybrid",
        top_k: int = 5,
        score_threshold: float | None = None,
        metadata_filter: Mapping[str, MetadataValue] | None = None,
        timeout: float | None = None,
        user: str = "",
    ) -> list[Hit]:
        """The best chunks for `query` (same meaning as `KnowledgeStore.search`).

        Args:
            query: The question or keywords.
            knowledge_bases: Bases to search; empty searches all of them.
            mode: ``dense``, ``lexical`` or ``hybrid``.
            top_k: 1-50 hits at most.
            score_threshold: Drop hits scoring below it; None (or 0) keeps all.
            metadata_filter: Only chunks whose document metadata has exactly these values.
            timeout: Deadline in seconds; the client's default when None.
            user: The end user the search is for: the service then applies that user's
                grants and ownership instead of the caller's (the caller must be one of its
                `trusted_gateways`, else PERMISSION_DENIED ``UNTRUSTED_GATEWAY``). Empty:
                the caller searches as itself.

        Raises:
            ValueError: An unknown `mode`.
            AgentClientError: ``INVALID_SCHEMA`` (bad query, names, top_k...),
                ``KNOWLEDGE_BASE_NOT_FOUND``, or the call failed.
        """
        if mode not in MODE_TO_PB:
            raise ValueError(f"mode must be one of {', '.join(MODE_TO_PB)}, not {mode!r}")
        request = _pb.SearchRequest(
            query=query,
            knowledge_bases=list(knowledge_bases),
            top_k=top_k,
            score_threshold=score_threshold or 0.0,
            metadata_filter=dict_to_struct(metadata_filter),
            mode=MODE_TO_PB[mode],  # type: ignore[arg-type]
        )
        response = await self._unary(self._stub.Search, request, timeout, user=user)
        return [hit_from_pb(hit) for hit in response.hits]

    async def get_document(
        self, knowledge_base: str, document_id: str, *, timeout: float | None = None
    ) -> StoredDocument:
        """One stored document, text and metadata included.

        Raises:
            AgentClientError: ``KNOWLEDGE_BASE_NOT_FOUND``, ``DOCUMENT_NOT_FOUND``, or the
                call failed.
        """
        request = _pb.GetDocumentRequest(knowledge_base=knowledge_base, document_id=document_id)
        response = await self._unary(self._stub.GetDocument, request, timeout)
        return stored_document_from_pb(knowledge_base, response)

    async def delete_document(
        self, knowledge_base: str, document_id: str, *, timeout: float | None = None
    ) -> None:
        """Delete one document and its chunks.

        Raises:
            AgentClientError: ``KNOWLEDGE_BASE_NOT_FOUND``, ``DOCUMENT_NOT_FOUND``, or the
                call failed.
        """
        request = _pb.DeleteDocumentRequest(knowledge_base=knowledge_base, document_id=document_id)
        await self._unary(self._stub.DeleteDocument, request, timeout)

    async def list_user_documents(
        self, *, page_size: int = 0, page_token: str = "", timeout: float | None = None
    ) -> tuple[list[StoredDocument], str]:
        """One page of the documents the caller's user owns, in every base, and the next
        page's token ("" after the last)."""
        request = _pb.ListUserDocumentsRequest(page_size=page_size, page_token=page_token)
        response = await self._unary(self._stub.ListUserDocuments, request, timeout)
        docs = [stored_document_from_pb(d.knowledge_base, d.stored) for d in response.documents]
        return docs, response.next_page_token

    async def delete_user_documents(self, *, timeout: float | None = None) -> int:
        """Delete every document the caller's user owns, in every base; how many went."""
        request = _pb.DeleteUserDocumentsRequest()
        response = await self._unary(self._stub.DeleteUserDocuments, request, timeout)
        return int(response.deleted_count)
