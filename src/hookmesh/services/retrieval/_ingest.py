"""One Ingest stream: documents batched into durable store commits, bad ones reported apart."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterable
from dataclasses import dataclass, field

import grpc

from hookmesh.errors import RequestError, SchemaError
from hookmesh.retrieval import Document, KnowledgeStore
from hookmesh.retrieval.codec import document_from_pb
from hookmesh.services.retrieval._access import AccessPolicy
from hookmesh.services.retrieval._config import RetrievalServiceConfig
from hookmesh.v1 import retrieval_pb2 as _pb

_BATCH_FIELD = re.compile(r"^documents\[(\d+)\](.*)$")


def too_many_documents(limit: int) -> RequestError:
    """INVALID_ARGUMENT / ``TOO_MANY_DOCUMENTS``: a stream sent more than the limit."""
    return RequestError(
        grpc.StatusCode.INVALID_ARGUMENT,
        "TOO_MANY_DOCUMENTS",
        f"one Ingest stream may send at most {limit} documents; split it into several calls",
        metadata={"limit": str(limit)},
    )


def rename_fields(error: SchemaError, renames: dict[str, str]) -> SchemaError:
    """`error` with each field path starting with a key of `renames` given the new prefix."""
    violations = []
    for v in error.violations:
        name = v.field
        for old, new in renames.items():
            if name == old or name.startswith((f"{old}.", f"{old}[")):
                name = new + name[len(old) :]
                break
        violations.append(type(v)(name, v.description))
    return SchemaError(violations, reason=error.reason)


@dataclass
class _Pending:
    """A document waiting in the batch: its position in the stream and its value."""

    index: int
    document: Document


@dataclass
class Ingestion:
    """The state of one Ingest stream.

    Documents are validated as they arrive and gathered into batches of at most
    `max_batch_documents` documents and `max_batch_chars` characters; each batch is one
    `store.ingest` call, which returns once it is durably committed. One batch commits
    while the next fills, so reading the stream overlaps embedding. A document id seen
    again in the filling batch closes it first: the later version wins, as with two calls.
    """

    store: KnowledgeStore
    config: RetrievalServiceConfig
    access: AccessPolicy
    owner: str = ""
    """The ingesting user, recorded on each document written."""
    knowledge_base: str = ""
    received: int = 0
    response: _pb.IngestResponse = field(default_factory=_pb.IngestResponse)
    _batch: list[_Pending] = field(default_factory=list)
    _batch_ids: set[str] = field(default_factory=set)
    _batch_chars: int = 0
    _committing: asyncio.Task[None] | None = None

    async def run(self, requests: AsyncIterable[_pb.IngestRequest]) -> _pb.IngestResponse:
        """Consume the stream; the response once every batch has committed.

        Raises:
            HookmeshError: A bad stream (bad or unknown base, another base named, too many
                documents) or a store failure; batches committed before it stay stored.
        """
        try:
            async for request in requests:
                await self._add(request)
            await self._flush()
            await self._wait()
        finally:
            task = self._committing
            if task is not None and not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        self.response.received_count = self.received
        self.response.errors.sort(key=lambda e: e.index)
        return self.response

    async def _add(self, request: _pb.IngestRequest) -> None:
        index = self.received
        self.received += 1
        if index == 0:
            await self.access.check(self.store, request.knowledge_base, "write")
            try:
                await self.store.get_knowledge_base(request.knowledge_base)
            except SchemaError as exc:
                raise rename_fields(exc, {"name": "knowledge_base"}) from None
            self.knowledge_base = request.knowledge_base
        elif request.knowledge_base != self.knowledge_base:
            raise SchemaError.single(
                "knowledge_base",
                f"message {index} names {request.knowledge_base!r:.80}, but this stream "
                f"ingests into {self.knowledge_base!r}: use one Ingest call per base",
            )
        if self.received > self.config.max_documents_per_ingest:
            raise too_many_documents(self.config.max_documents_per_ingest)
        pb = request.document
        size = len(pb.text)
        if size > self.config.max_document_chars:
            self._error(
                index,
                pb.id,
                "DOCUMENT_TOO_LARGE",
                f"document.text: {size} characters; the limit is "
                f"{self.config.max_document_chars}: split the document",
            )
            return
        if (
            pb.id in self._batch_ids
            or len(self._batch) >= self.config.max_batch_documents
            or self._batch_chars + size > self.config.max_batch_chars
        ):
            await self._flush()
        try:
            document = document_from_pb(pb)
        except SchemaError as exc:
            self._error(index, pb.id, exc.reason, exc.message)
            return
        self._batch.append(_Pending(index, document))
        self._batch_ids.add(pb.id)
        self._batch_chars += size

    async def _flush(self) -> None:
        """Start committing the filled batch, after the previous one has committed."""
        if not self._batch:
            return
        batch, self._batch, self._batch_ids, self._batch_chars = self._batch, [], set(), 0
        await self._wait()
        self._committing = asyncio.create_task(self._commit(batch))

    async def _wait(self) -> None:
        task, self._committing = self._committing, None
        if task is not None:
            await task

    async def _commit(self, batch: list[_Pending]) -> None:
        """Ingest `batch`; a document the store refuses is reported and the rest retried."""
        while batch:
            try:
                results = await self.store.ingest(
                    self.knowledge_base, [p.document for p in batch], owner=self.owner
                )
            except SchemaError as exc:
                violation = exc.violations[0]
                found = _BATCH_FIELD.match(violation.field)
                if found is None or int(found.group(1)) >= len(batch):
                    if len(batch) == 1:  # nothing left to split: the document itself
                        bad = batch.pop()
                        self._error(bad.index, bad.document.id, exc.reason, exc.message)
                        continue
                    half = len(batch) // 2
                    await self._commit(batch[:half])
                    batch = batch[half:]
                    continue
                bad = batch.pop(int(found.group(1)))
                self._error(
                    bad.index,
                    bad.document.id,
                    exc.reason,
                    f"document{found.group(2)}: {violation.description}",
                )
                continue
            for result in results:
                self.response.ingested_ids.append(result.document_id)
                if result.status == "unchanged":
                    self.response.unchanged_count += 1
                elif result.status in ("created", "replaced"):
                    self.response.chunk_count += result.chunk_count
            self.response.ingested_count += len(results)
            return

    def _error(self, index: int, document_id: str, reason: str, message: str) -> None:
        self.response.errors.append(
            _pb.DocumentError(document_id=document_id, index=index, reason=reason, message=message)
        )
