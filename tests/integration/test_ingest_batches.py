"""Where an Ingest stream's batches end, seen in the real store: a batch is one commit, and
every document a commit writes gets that commit's time as its `update_time` (the SQLite
store reads the clock once per transaction), so documents share an `update_time` exactly
when they were committed together. A batch ends at `max_batch_documents` documents, before
a document that would take it past `max_batch_chars` characters, and before an id it holds
already; a document refused on its own takes no room in it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from hookmesh.client import RetrievalClient
from hookmesh.retrieval import Document
from hookmesh.services.retrieval import load_retrieval_config, start_retrieval_service
from tests.agent_helpers import SHORT_TIMEOUT

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[Any]:
    """Start a retrieval service on 127.0.0.1:0 with a SQLite store and `limits`."""
    running: list[Any] = []

    async def start(**limits: int) -> str:
        config = load_retrieval_config(None, store=f"sqlite:///{tmp_path}/kb.db", **limits)
        started = await start_retrieval_service(config, address="127.0.0.1:0")
        running.append(started)
        return f"127.0.0.1:{started.port}"

    try:
        yield start
    finally:
        for started in running:
            await started.stop(None)


async def _commits(target: str, documents: list[Document]) -> list[list[str]]:
    """Ingest `documents` in one stream into a new base; the ids each commit wrote (grouped
    by their shared `update_time`), commits in the order they were made."""
    async with RetrievalClient(target, timeout=SHORT_TIMEOUT) as client:
        await client.create_knowledge_base("kb")

        async def stream() -> AsyncIterator[Document]:
            for document in documents:
                yield document

        report = await client.ingest("kb", stream())
        assert report.errors == []
        times: dict[datetime, list[str]] = {}
        for doc_id in dict.fromkeys(report.ingested_ids):
            stored = await client.get_document("kb", doc_id)
            times.setdefault(stored.update_time, []).append(doc_id)
    return [times[t] for t in sorted(times)]


def _docs(*sizes: int) -> list[Document]:
    return [Document(f"d{i}", "x" * size) for i, size in enumerate(sizes)]


async def test_a_batch_holds_max_batch_documents_and_no_more(service: Any) -> None:
    target = await service(max_batch_documents=3)
    assert await _commits(target, _docs(*[5] * 7)) == [
        ["d0", "d1", "d2"],
        ["d3", "d4", "d5"],
        ["d6"],
    ]


async def test_a_batch_holds_up_to_max_batch_chars_exactly(service: Any) -> None:
    target = await service(max_document_chars=100, max_batch_chars=100)
    assert await _commits(target, _docs(40, 60, 1, 99, 1, 100, 100)) == [
        ["d0", "d1"],  # 100 characters: at the bound, one commit
        ["d2", "d3"],
        ["d4"],  # 1 + 100 would pass it
        ["d5"],
        ["d6"],
    ]


async def test_a_batch_fills_to_the_character_bound_before_it_closes(service: Any) -> None:
    """Not halves of a batch that would have been too long: the longest run that fits."""
    target = await service(max_document_chars=100, max_batch_chars=100)
    assert await _commits(target, _docs(30, 30, 30, 30)) == [["d0", "d1", "d2"], ["d3"]]


async def test_the_characters_of_a_closed_batch_do_not_count_in_the_next(service: Any) -> None:
    target = await service(max_document_chars=10, max_batch_chars=20)
    assert await _commits(target, _docs(10, 10, 10, 5, 5, 1)) == [
        ["d0", "d1"],
        ["d2", "d3", "d4"],  # 20: the first batch's 20 were reset when it closed
        ["d5"],
    ]


async def test_an_id_the_batch_holds_closes_it_and_its_later_version_wins(
    service: Any,
) -> None:
    target = await service(max_batch_documents=10)
    documents = [
        Document("a", "first version"),
        Document("b", "bee"),
        Document("a", "second version"),
        Document("c", "sea"),
    ]
    assert await _commits(target, documents) == [
        ["b"],
        ["a", "c"],
    ]  # a first with b, then again with c
    async with RetrievalClient(target, timeout=SHORT_TIMEOUT) as client:
        a, b = [await client.get_document("kb", i) for i in "ab"]
    assert a.text == "second version"
    assert a.create_time == b.create_time  # created by the first commit


async def test_a_document_refused_alone_takes_no_room_in_the_batch(service: Any) -> None:
    """A too-large text and metadata that is no JSON value (NaN) are refused as they arrive:
    the batch fills with the documents around them, by count and by characters. (A bad id
    is refused by the store, at commit: it does take a place.)"""
    target = await service(max_batch_documents=2, max_document_chars=10, max_batch_chars=10)
    documents = [
        Document("d0", "x" * 5),
        Document("big", "x" * 11),
        Document("nan", "x" * 5, {"score": float("nan")}),
        Document("d1", "x" * 5),
        Document("d2", "x" * 5),
    ]
    async with RetrievalClient(target, timeout=SHORT_TIMEOUT) as client:
        await client.create_knowledge_base("kb")
        report = await client.ingest("kb", documents)
        assert [(e.index, e.reason) for e in report.errors] == [
            (1, "DOCUMENT_TOO_LARGE"),
            (2, "INVALID_SCHEMA"),
        ]
        times = [(await client.get_document("kb", i)).update_time for i in ("d0", "d1", "d2")]
    assert times[0] == times[1] != times[2]
