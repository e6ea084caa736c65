"""The retrieval service over real gRPC on loopback: knowledge bases, streamed ingest, search,
bad input, health, a client cancel, kill -9 durability, and a PostgreSQL smoke test."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import struct_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc

from hookmesh.client import AgentClientError, RetrievalClient
from hookmesh.retrieval import Document
from hookmesh.services.retrieval import (
    SERVICE_NAME,
    RetrievalService,
    load_retrieval_config,
    start_retrieval_service,
)
from hookmesh.testing import hookmesh_process
from hookmesh.v1 import retrieval_pb2 as pb
from hookmesh.v1 import retrieval_pb2_grpc as pb_grpc
from tests.pg import postgres_url  # noqa: F401  (the session-wide PostgreSQL server)
from tests.servers import stopped_at_exit, target

pytestmark = pytest.mark.timeout(90)

SHORT_TIMEOUT = 30.0
START_TIMEOUT = 60.0
ROOT = Path(__file__).resolve().parents[2]

Start = Callable[..., Awaitable[RetrievalService]]

NOTES = [
    Document("herons", "Grey herons stand still in shallow water and spear fish with their bill."),
    Document("bread", "Sourdough bread rises slowly because wild yeast ferments the dough."),
    Document("tides", "Tides follow the moon: two highs and two lows roughly every day."),
]


@pytest.fixture
async def start(tmp_path: Path) -> AsyncIterator[Start]:
    """Start retrieval services on 127.0.0.1:0 with a SQLite store in tmp_path."""

    async def run(**config: Any) -> RetrievalService:
        config.setdefault("store", f"sqlite:///{tmp_path}/retrieval.db")
        return await start_retrieval_service(
            load_retrieval_config(None, grace_seconds=0.5, **config), address="127.0.0.1:0"
        )

    async with stopped_at_exit(run) as started:
        yield started


async def _stream(*requests: pb.IngestRequest) -> AsyncIterator[pb.IngestRequest]:
    for request in requests:
        yield request


def _doc(kb: str, doc_id: str, text: str = "some text", **metadata: Any) -> pb.IngestRequest:
    return pb.IngestRequest(
        knowledge_base=kb,
        document=pb.Document(id=doc_id, text=text, metadata=_struct(metadata)),
    )


def _struct(values: dict[str, Any]) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    out.update(values)
    return out


async def test_knowledge_base_lifecycle_through_the_client(start: Start) -> None:
    service = await start()
    async with RetrievalClient(target(service), timeout=SHORT_TIMEOUT) as client:
        kb = await client.create_knowledge_base("notes", "Field notes", max_tokens=64)
        assert (kb.name, kb.description, kb.chunking.max_tokens, kb.chunking.overlap_tokens) == (
            "notes",
            "Field notes",
            64,
            32,
        )
        assert kb.dimension == 384 and kb.create_time.tzinfo is not None
        report = await client.ingest("notes", [*NOTES, Document("titled", "x", {"title": "T"})])
        assert report.ingested_ids == ["herons", "bread", "tides", "titled"]
        assert (report.received_count, report.ingested_count, report.errors) == (4, 4, [])
        assert report.chunk_count == 4
        [listed] = await client.list_knowledge_bases()
        assert (listed.name, listed.document_count, listed.chunk_count) == ("notes", 4, 4)

        hits = await client.search("birds that catch fish", ["notes"], top_k=2, mode="dense")
        assert [h.document_id for h in hits][:1] == ["herons"]
        assert [h.rank for h in hits] == [1, 2]
        assert hits[0].chunk_id == "herons#0" and hits[0].end == len(NOTES[0].text)
        assert (await client.search("sourdough", mode="lexical"))[0].document_id == "bread"

        doc = await client.get_document("notes", "titled")
        assert (doc.text, dict(doc.metadata), doc.chunk_count) == ("x", {"title": "T"}, 1)
        await client.delete_document("notes", "titled")
        with pytest.raises(AgentClientError) as gone:
            await client.get_document("notes", "titled")
        assert (gone.value.code, gone.value.reason) == (
            grpc.StatusCode.NOT_FOUND,
            "DOCUMENT_NOT_FOUND",
        )
        await client.delete_knowledge_base("notes")
        assert await client.list_knowledge_bases() == []
        assert await client.search("anything") == []  # no bases: nothing to search


async def test_ingest_batches_reports_bad_documents_and_is_idempotent(start: Start) -> None:
    service = await start(max_batch_documents=4, max_document_chars=200)
    async with RetrievalClient(target(service), timeout=SHORT_TIMEOUT) as client:
        await client.create_knowledge_base("kb")
        docs = [Document(f"d{i}", f"note {i} about rivers and bridges") for i in range(10)]
        docs[3] = Document("", "no id")
        docs[5] = Document("big", "x" * 201)
        docs[7] = Document("nested", "bad metadata", {"where": {"city": "Oslo"}})  # type: ignore[dict-item]
        docs.append(Document("d1", "note 1, second version, about rivers"))

        async def produce() -> AsyncIterator[Document]:
            for doc in docs:
                yield doc

        report = await client.ingest("kb", produce())
        assert report.received_count == 11
        assert report.ingested_ids == ["d0", "d1", "d2", "d4", "d6", "d8", "d9", "d1"]
        assert [(e.index, e.document_id, e.reason) for e in report.errors] == [
            (3, "", "INVALID_SCHEMA"),
            (5, "big", "DOCUMENT_TOO_LARGE"),
            (7, "nested", "INVALID_SCHEMA"),
        ]
        assert report.errors[0].message.startswith("document.id:")
        assert report.errors[2].message.startswith("document.metadata[where]:")
        assert (await client.get_document("kb", "d1")).text.startswith("note 1, second")

        again = await client.ingest("kb", [docs[0], Document("d2", docs[2].text, {"n": 2})])
        assert (again.ingested_count, again.unchanged_count, again.chunk_count) == (2, 1, 0)
        assert (await client.get_document("kb", "d2")).metadata == {"n": 2}
        [kb] = await client.list_knowledge_bases()
        assert kb.document_count == 7


BAD = [
    (
        "CreateKnowledgeBase",
        pb.CreateKnowledgeBaseRequest(name="Bad Name"),
        "INVALID_SCHEMA",
        "name",
    ),
    (
        "CreateKnowledgeBase",
        pb.CreateKnowledgeBaseRequest(name="ok", chunking=pb.ChunkingOptions(max_tokens=4)),
        "INVALID_SCHEMA",
        "chunking.max_tokens",
    ),
    (
        "CreateKnowledgeBase",
        pb.CreateKnowledgeBaseRequest(name="ok", description="d" * 2000),
        "INVALID_SCHEMA",
        "description",
    ),
    ("Search", pb.SearchRequest(query=" ", knowledge_bases=["kb"]), "INVALID_SCHEMA", "query"),
    ("Search", pb.SearchRequest(query="q", top_k=51), "INVALID_SCHEMA", "top_k"),
    ("Search", pb.SearchRequest(query="q", mode=9), "INVALID_SCHEMA", "mode"),  # type: ignore[arg-type]
    (
        "Search",
        pb.SearchRequest(query="q", knowledge_bases=["kb", "NO"]),
        "INVALID_SCHEMA",
        "knowledge_bases[1]",
    ),
    (
        "Search",
        pb.SearchRequest(query="q", metadata_filter=_struct({"a": [1]})),
        "INVALID_SCHEMA",
        "metadata_filter[a]",
    ),
    ("GetDocument", pb.GetDocumentRequest(knowledge_base="kb"), "INVALID_SCHEMA", "document_id"),
]

NOT_FOUND = [
    ("Search", pb.SearchRequest(query="q", knowledge_bases=["nope"]), "KNOWLEDGE_BASE_NOT_FOUND"),
    ("DeleteKnowledgeBase", pb.DeleteKnowledgeBaseRequest(name="nope"), "KNOWLEDGE_BASE_NOT_FOUND"),
    (
        "GetDocument",
        pb.GetDocumentRequest(knowledge_base="nope", document_id="d"),
        "KNOWLEDGE_BASE_NOT_FOUND",
    ),
    (
        "GetDocument",
        pb.GetDocumentRequest(knowledge_base="kb", document_id="d"),
        "DOCUMENT_NOT_FOUND",
    ),
    (
        "DeleteDocument",
        pb.DeleteDocumentRequest(knowledge_base="kb", document_id="d"),
        "DOCUMENT_NOT_FOUND",
    ),
]


@pytest.mark.parametrize(
    ("request_pb", "field"),
    [
        (pb.SearchRequest(query="q", top_k=100), "top_k"),
        (pb.SearchRequest(query=" "), "query"),
        (pb.SearchRequest(query="q", mode=9), "mode"),  # type: ignore[arg-type]
        (pb.SearchRequest(query="q", score_threshold=float("inf")), "score_threshold"),
    ],
    ids=["top_k", "query", "mode", "score_threshold"],
)
async def test_a_bad_search_of_every_base_is_refused_when_there_is_none(
    start: Start, request_pb: pb.SearchRequest, field: str
) -> None:
    """With no base to search the answer would be "no hits"; bad terms are refused first."""
    service = await start()
    async with grpc.aio.insecure_channel(target(service)) as channel:
        stub = pb_grpc.RetrievalServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as exc:
            await stub.Search(request_pb, timeout=SHORT_TIMEOUT)
        error = AgentClientError.from_rpc_error(exc.value)
        assert (error.code, error.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_SCHEMA")
        assert [v.field for v in error.violations] == [field]
        assert not (await stub.Search(pb.SearchRequest(query="q"), timeout=SHORT_TIMEOUT)).hits


async def test_bad_requests_get_a_code_a_reason_and_the_field(start: Start) -> None:
    service = await start(max_documents_per_ingest=3)
    async with grpc.aio.insecure_channel(target(service)) as channel:
        stub = pb_grpc.RetrievalServiceStub(channel)
        await stub.CreateKnowledgeBase(pb.CreateKnowledgeBaseRequest(name="kb"), timeout=5)

        async def refused(call: Any) -> AgentClientError:
            with pytest.raises(grpc.aio.AioRpcError) as exc:
                await call
            return AgentClientError.from_rpc_error(exc.value)

        for method, request, reason, field in BAD:
            error = await refused(getattr(stub, method)(request, timeout=SHORT_TIMEOUT))
            assert (error.code, error.reason) == (grpc.StatusCode.INVALID_ARGUMENT, reason), field
            assert [v.field for v in error.violations][:1] == [field]
        for method, request, reason in NOT_FOUND:
            error = await refused(getattr(stub, method)(request, timeout=SHORT_TIMEOUT))
            assert (error.code, error.reason) == (grpc.StatusCode.NOT_FOUND, reason), method
        error = await refused(
            stub.CreateKnowledgeBase(pb.CreateKnowledgeBaseRequest(name="kb"), timeout=5)
        )
        assert (error.code, error.reason) == (
            grpc.StatusCode.ALREADY_EXISTS,
            "KNOWLEDGE_BASE_EXISTS",
        )

        ingest: list[tuple[tuple[pb.IngestRequest, ...], grpc.StatusCode, str, str]] = [
            ((_doc("nope", "a"),), grpc.StatusCode.NOT_FOUND, "KNOWLEDGE_BASE_NOT_FOUND", ""),
            (
                (_doc("Bad!", "a"),),
                grpc.StatusCode.INVALID_ARGUMENT,
                "INVALID_SCHEMA",
                "knowledge_base",
            ),
            (
                (_doc("kb", "a"), _doc("other", "b")),
                grpc.StatusCode.INVALID_ARGUMENT,
                "INVALID_SCHEMA",
                "knowledge_base",
            ),
            (
                tuple(_doc("kb", f"m{i}") for i in range(4)),
                grpc.StatusCode.INVALID_ARGUMENT,
                "TOO_MANY_DOCUMENTS",
                "",
            ),
        ]
        for requests, code, reason, field in ingest:
            error = await refused(stub.Ingest(_stream(*requests), timeout=SHORT_TIMEOUT))
            assert (error.code, error.reason) == (code, reason)
            assert [v.field for v in error.violations] == ([field] if field else [])
        # The server is still up, and an empty stream is a no-op.
        empty = await stub.Ingest(_stream(), timeout=SHORT_TIMEOUT)
        assert (empty.received_count, empty.ingested_count) == (0, 0)


async def test_an_undecodable_message_in_an_ingest_stream_is_invalid_argument(
    start: Start, caplog: pytest.LogCaptureFixture
) -> None:
    """The caller's error, not the store's: no ERROR log (it once said "knowledge store call
    failed" and answered INTERNAL)."""
    service = await start()
    async with grpc.aio.insecure_channel(target(service)) as channel:
        await pb_grpc.RetrievalServiceStub(channel).CreateKnowledgeBase(
            pb.CreateKnowledgeBaseRequest(name="kb"), timeout=SHORT_TIMEOUT
        )
        ingest = channel.stream_unary(f"/{SERVICE_NAME}/Ingest")

        async def requests() -> AsyncIterator[bytes]:
            yield _doc("kb", "a").SerializeToString()
            yield b"\xff\xff\xff"  # not protobuf wire data

        with pytest.raises(grpc.aio.AioRpcError) as exc:
            await ingest(requests(), timeout=SHORT_TIMEOUT)
    error = AgentClientError.from_rpc_error(exc.value)
    assert (error.code, error.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "UNDECODABLE_REQUEST")
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_search_filters_by_metadata_and_threshold(start: Start) -> None:
    service = await start()
    async with RetrievalClient(target(service), timeout=SHORT_TIMEOUT) as client:
        await client.create_knowledge_base("a")
        await client.create_knowledge_base("b")
        await client.ingest("a", [Document("x", "the lighthouse keeper", {"year": 1889})])
        await client.ingest("b", [Document("y", "the lighthouse lamp", {"year": 1920})])
        both = await client.search("lighthouse", mode="lexical")
        assert {h.knowledge_base for h in both} == {"a", "b"}
        [old] = await client.search("lighthouse", metadata_filter={"year": 1889})
        assert (old.document_id, old.metadata) == ("x", {"year": 1889})
        assert await client.search("lighthouse", ["a"], mode="dense", score_threshold=0.99) == []


async def test_health_and_reflection_are_served(start: Start) -> None:
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    service = await start()
    async with grpc.aio.insecure_channel(target(service)) as channel:
        status = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=SERVICE_NAME), timeout=SHORT_TIMEOUT
        )
        assert status.status == health_pb2.HealthCheckResponse.SERVING
        responses = reflection_pb2_grpc.ServerReflectionStub(channel).ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=SHORT_TIMEOUT
        )
        names = [s.name async for r in responses for s in r.list_services_response.service]
        assert SERVICE_NAME in names


async def test_a_cancelled_ingest_ends_the_stream_and_keeps_committed_batches(
    start: Start,
) -> None:
    service = await start(max_batch_documents=2)
    gate = asyncio.Event()
    sent = asyncio.Event()
    closed = asyncio.Event()

    async def produce() -> AsyncIterator[Document]:
        try:
            for i in range(4):
                yield Document(f"c{i}", f"committed note {i}")
            sent.set()
            await gate.wait()  # held open until the test cancels the call
            yield Document("never", "never sent")
        finally:
            closed.set()

    async with RetrievalClient(target(service), timeout=SHORT_TIMEOUT) as client:
        await client.create_knowledge_base("kb")
        task = asyncio.create_task(client.ingest("kb", produce()))
        async with asyncio.timeout(SHORT_TIMEOUT):
            await sent.wait()
            # The first batch of two was full: wait until the service has committed it.
            while (await client.list_knowledge_bases())[0].document_count < 2:
                pass  # each poll is a round trip; bounded by the timeout above
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        async with asyncio.timeout(SHORT_TIMEOUT):
            await closed.wait()  # the caller's generator is closed, not left waiting
        assert (await client.get_document("kb", "c0")).text == "committed note 0"
        report = await client.ingest(
            "kb", [Document(f"c{i}", f"committed note {i}") for i in range(4)]
        )
        assert (report.ingested_count, report.unchanged_count) == (4, 2)
    # The cancel reached the service: no stream is left open, so stop needs none of its grace.
    async with asyncio.timeout(SHORT_TIMEOUT):
        await service.stop(10 * SHORT_TIMEOUT)


def test_config_from_environment_and_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "retrieval.yaml"
    config.write_text("listen: 127.0.0.1:7100\nmax_batch_documents: 8\n")
    monkeypatch.setenv("HOOKMESH_RETRIEVAL_MAX_BATCH_DOCUMENTS", "16")
    settings = load_retrieval_config(config)
    assert (settings.listen, settings.max_batch_documents) == ("127.0.0.1:7100", 16)
    assert settings.store == "sqlite:///hookmesh-data/retrieval.db"
    assert settings.limits().max_batch_documents == 16
    monkeypatch.delenv("HOOKMESH_RETRIEVAL_MAX_BATCH_DOCUMENTS")
    with pytest.raises(ValueError, match="max_batch_documents"):
        load_retrieval_config(None, max_batch_documents=257)
    with pytest.raises(ValueError, match="max_batch_chars"):
        load_retrieval_config(None, max_document_chars=5000, max_batch_chars=4000)


# -- durability: kill -9 in the middle of a long ingest ------------------------------------


@asynccontextmanager
async def service_process(store: str) -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    """``hookmesh serve retrieval`` on 127.0.0.1:0; yields it and its address."""
    async with hookmesh_process(
        "serve", "retrieval", "--listen", "127.0.0.1:0", "--store", store,
        ready="retrieval service listening on ",
        # Small batches: a long ingest is many durable commits, so the kill lands among them.
        env={"HOOKMESH_RETRIEVAL_MAX_BATCH_DOCUMENTS": "16"},
    ) as service:  # fmt: skip
        yield service.process, service.address


def _batch(call: int, size: int) -> list[Document]:
    return [
        Document(f"c{call}-d{i}", f"Call {call}, document {i}: notes on tide pools and kelp {i}.")
        for i in range(size)
    ]


async def test_kill_9_during_a_long_ingest_loses_no_acknowledged_document(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/retrieval.db"
    acknowledged: list[str] = []
    size = 60
    held = asyncio.Event()  # never set: the fourth call stays open until the kill

    async def long_call(docs: list[Document]) -> AsyncIterator[Document]:
        for doc in docs:
            yield doc
        await held.wait()

    async with (
        service_process(store) as (process, address),
        RetrievalClient(address, timeout=SHORT_TIMEOUT) as client,
    ):
        await client.create_knowledge_base("kb", max_tokens=24)

        async def ingest_all() -> None:
            for call in range(5):
                docs = _batch(call, size if call != 3 else 4 * size)
                report = await client.ingest("kb", long_call(docs) if call == 3 else docs)
                assert report.errors == []
                acknowledged.extend(report.ingested_ids)

        writer = asyncio.create_task(ingest_all())
        async with asyncio.timeout(SHORT_TIMEOUT):
            # Three calls acknowledged; wait until part of the fourth is committed too.
            while (await client.list_knowledge_bases())[0].document_count <= 3 * size:
                pass  # each poll is a round trip; bounded by the timeout
        process.kill()  # SIGKILL mid-stream: no graceful stop, no checkpoint
        async with asyncio.timeout(SHORT_TIMEOUT):
            with pytest.raises(AgentClientError) as failed:
                await writer
            assert await process.wait() == -9
        assert failed.value.code == grpc.StatusCode.UNAVAILABLE

    assert len(acknowledged) == 3 * size
    async with (
        service_process(store) as (_, address),
        RetrievalClient(address, timeout=SHORT_TIMEOUT) as client,
    ):
        for doc_id in acknowledged:
            call, _, i = doc_id.removeprefix("c").partition("-d")
            stored = await client.get_document("kb", doc_id)
            assert stored.text == _batch(int(call), size)[int(i)].text
        [kb] = await client.list_knowledge_bases()
        assert kb.document_count >= len(acknowledged)
        # Re-sending the interrupted call is safe: ingest is idempotent by id.
        report = await client.ingest("kb", _batch(3, 4 * size))
        assert report.ingested_count == 4 * size and report.errors == []
        assert report.unchanged_count > 0  # part of it was committed before the kill
        hits = await client.search("kelp 7", ["kb"], mode="lexical", top_k=50)
        assert hits


# -- PostgreSQL -----------------------------------------------------------------------------


async def test_postgresql_smoke(start: Start, postgres_url: str) -> None:  # noqa: F811
    import psycopg

    namespace = f"t_{uuid.uuid4().hex[:16]}"
    try:
        service = await start(store=postgres_url, namespace=namespace)
        async with RetrievalClient(target(service), timeout=SHORT_TIMEOUT) as client:
            await client.create_knowledge_base("notes")
            report = await client.ingest("notes", [*NOTES, Document("", "bad")])
            assert report.ingested_count == 3 and [e.index for e in report.errors] == [3]
            hits = await client.search("moon and sea level", ["notes"], top_k=1)
            assert [h.document_id for h in hits] == ["tides"]
            assert (await client.get_document("notes", "bread")).chunk_count == 1
            with pytest.raises(AgentClientError) as missing:
                await client.search("q", ["nope"])
            assert missing.value.reason == "KNOWLEDGE_BASE_NOT_FOUND"
    finally:
        async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
            await conn.execute(f"DROP SCHEMA IF EXISTS {namespace} CASCADE")  # type: ignore[arg-type]
