"""The knowledge store contract, run against SQLite and PostgreSQL with real embeddings."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import grpc
import pytest

from hookmesh.errors import HookmeshError, SchemaError
from hookmesh.retrieval import (
    ChunkingOptions,
    Document,
    Embedder,
    Hit,
    KnowledgeStore,
    Limits,
    Vectors,
)

Backend = Any  # conftest.Backend: name, url, and open(embedder=None, **options)

pytestmark = pytest.mark.timeout(60)
SHORT_TIMEOUT = 30.0
RRF_TOP = 1 / 61

CORPUS = [
    Document(
        "eiffel",
        "The Eiffel Tower is a wrought-iron lattice tower in Paris, France. It was completed "
        "in 1889 as the entrance arch of the World's Fair.",
        {"topic": "landmarks", "year": 1889, "public": True},
    ),
    Document(
        "python",
        "Python is a high-level programming language. Its design philosophy emphasises code "
        "readability with significant indentation.",
        {"topic": "software", "year": 1991, "public": True},
    ),
    Document(
        "photosynthesis",
        "Photosynthesis is the process plants use to turn sunlight, water and carbon dioxide "
        "into glucose and oxygen.",
        {"topic": "biology", "year": None, "public": False},
    ),
    Document(
        "rust",
        "Rust is a systems programming language focused on memory safety without a garbage "
        "collector. The borrow checker enforces ownership rules at compile time.",
        {"topic": "software", "year": 2015, "public": True},
    ),
    Document(
        "everest",
        "Mount Everest is Earth's highest mountain above sea level, in the Himalayas on the "
        "border between Nepal and China.",
        {"topic": "landmarks", "public": True},
    ),
    Document(
        "errors",
        "Error code XJ4711 means the upstream connection was refused by the proxy.",
        {"topic": "software", "public": False},
    ),
]


async def _error(call: object) -> HookmeshError:
    with pytest.raises(HookmeshError) as caught:
        async with asyncio.timeout(SHORT_TIMEOUT):
            await call  # type: ignore[misc]
    return caught.value


def _ids(hits: Sequence[Hit]) -> list[str]:
    return [h.document_id for h in hits]


async def _loaded(store: KnowledgeStore, name: str = "kb") -> KnowledgeStore:
    await store.create_knowledge_base(name, "general knowledge")
    results = await store.ingest(name, CORPUS)
    assert [r.status for r in results] == ["created"] * len(CORPUS)
    return store


async def test_a_knowledge_base_keeps_its_owner(store: KnowledgeStore) -> None:
    created = await store.create_knowledge_base("mine", owner="alice")
    await store.create_knowledge_base("shared")
    assert created.owner == "alice"
    assert (await store.get_knowledge_base("mine")).owner == "alice"
    assert {kb.name: kb.owner for kb in await store.list_knowledge_bases()} == {
        "mine": "alice",
        "shared": "",
    }


async def test_knowledge_base_lifecycle(store: KnowledgeStore) -> None:
    created = await store.create_knowledge_base("faq", "Product questions", ChunkingOptions(64, 16))
    assert (created.name, created.description, created.chunking) == (
        "faq", "Product questions", ChunkingOptions(64, 16),
    )  # fmt: skip
    assert created.embedder == store.embedder.name and created.dimension == 384
    await store.create_knowledge_base("another")
    assert [kb.name for kb in await store.list_knowledge_bases()] == ["another", "faq"]
    await store.ingest("faq", CORPUS[:2])
    faq = await store.get_knowledge_base("faq")
    assert (faq.document_count, faq.chunk_count) == (2, 2)
    assert faq.create_time == created.create_time

    error = await _error(store.create_knowledge_base("faq"))
    assert (error.code, error.reason) == (grpc.StatusCode.ALREADY_EXISTS, "KNOWLEDGE_BASE_EXISTS")

    assert await store.delete_knowledge_base("faq") is True
    for call in (
        store.get_knowledge_base("faq"),
        store.delete_knowledge_base("faq"),
        store.search("x", ["faq"]),
        store.ingest("faq", CORPUS[:1]),
        store.get_document("faq", "python"),
    ):
        error = await _error(call)
        assert (error.code, error.reason) == (grpc.StatusCode.NOT_FOUND, "KNOWLEDGE_BASE_NOT_FOUND")
        assert error.metadata == {"knowledgeBase": "faq"}
    assert await store.delete_knowledge_base("faq", allow_missing=True) is False
    # the name is free again, and the new base starts empty
    await store.create_knowledge_base("faq")
    assert await store.search("Python programming", ["faq"], mode="lexical") == []


async def test_bad_requests_name_the_field(store: KnowledgeStore) -> None:
    await store.create_knowledge_base("kb")
    cases = [
        (store.create_knowledge_base("Bad Name"), "knowledge_base.name", "INVALID_SCHEMA"),
        (
            store.create_knowledge_base("big", chunking=ChunkingOptions(400, 0)),
            "knowledge_base.chunking.max_tokens",
            "INVALID_SCHEMA",
        ),
        (store.search("q", ["kb"], top_k=0), "top_k", "INVALID_SCHEMA"),
        (store.search("q", ["kb"], top_k=51), "top_k", "INVALID_SCHEMA"),
        (store.search("q", ["kb"], mode="fuzzy"), "mode", "INVALID_SCHEMA"),  # type: ignore[arg-type]
        (store.search("", ["kb"]), "query", "INVALID_SCHEMA"),
        (
            store.search("q", ["kb"], metadata_filter={"a": [1]}),
            "metadata_filter[a]",
            "INVALID_SCHEMA",
        ),
        (store.ingest("kb", [Document("", "x")]), "documents[0].id", "INVALID_SCHEMA"),
        (store.list_documents("kb", limit=0), "limit", "INVALID_SCHEMA"),
    ]
    for call, field, reason in cases:
        error = await _error(call)
        assert isinstance(error, SchemaError)
        assert (error.code, error.reason) == (grpc.StatusCode.INVALID_ARGUMENT, reason)
        assert error.violations[0].field == field


async def test_size_limits(backend: Backend) -> None:
    store = await backend.open(limits=Limits(max_document_chars=200, max_batch_documents=2))
    await store.create_knowledge_base("kb")
    error = await _error(store.ingest("kb", [Document("big", "x" * 201)]))
    assert (error.code, error.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "DOCUMENT_TOO_LARGE")
    error = await _error(store.ingest("kb", CORPUS[:3]))
    assert error.reason == "BATCH_TOO_LARGE"
    assert [r.status for r in await store.ingest("kb", [Document("ok", "x" * 200)])] == ["created"]


async def test_ingest_is_idempotent_by_document_id(store: KnowledgeStore) -> None:
    await _loaded(store)
    again = await store.ingest("kb", CORPUS)
    assert {r.status for r in again} == {"unchanged"}
    assert all(r.chunk_count == 1 for r in again)

    relabelled = Document("python", CORPUS[1].text, {"topic": "languages"})
    (result,) = await store.ingest("kb", [relabelled])
    assert result.status == "metadata_updated"
    (hit,) = await store.search("readability indentation", ["kb"], mode="lexical", top_k=1)
    assert (hit.chunk_id, hit.metadata) == ("python#0", {"topic": "languages"})

    rewritten = Document(
        "python", "Pythons are large constricting snakes found in Africa and Asia."
    )
    (result,) = await store.ingest("kb", [rewritten])
    assert (result.status, result.chunk_count) == ("replaced", 1)
    assert "python" not in _ids(
        await store.search("readability indentation", ["kb"], mode="lexical")
    )
    for hit in await store.search("readability indentation", ["kb"], top_k=50):
        assert hit.document_id != "python" or hit.text == rewritten.text
    (hit,) = await store.search("snake", ["kb"], mode="dense", top_k=1)
    assert (hit.document_id, hit.chunk_id, hit.metadata) == ("python", "python#0", {})
    stored = await store.get_document("kb", "python")
    assert stored.text == rewritten.text and stored.update_time >= stored.create_time
    kb = await store.get_knowledge_base("kb")
    assert (kb.document_count, kb.chunk_count) == (len(CORPUS), len(CORPUS))


async def test_a_replaced_document_keeps_no_old_chunks(backend: Backend) -> None:
    store = await backend.open()
    await store.create_knowledge_base("kb", chunking=ChunkingOptions(24, 4))
    long_text = "\n\n".join(
        f"Paragraph {i} talks about the violet {i}-th lighthouse keeper named Ottoline." * 2
        for i in range(6)
    )
    (first,) = await store.ingest("kb", [Document("doc", long_text)])
    assert first.chunk_count > 6
    (second,) = await store.ingest("kb", [Document("doc", "A single short replacement sentence.")])
    assert second.chunk_count == 1
    for mode in ("dense", "lexical", "hybrid"):
        hits = await store.search("lighthouse keeper Ottoline", ["kb"], mode=mode, top_k=50)  # type: ignore[arg-type]
        assert all(h.chunk_id == "doc#0" for h in hits)
    assert (await store.get_knowledge_base("kb")).chunk_count == 1


async def test_dense_finds_meaning_without_shared_words(store: KnowledgeStore) -> None:
    await _loaded(store)
    query = "tall metal landmark in the French capital"
    hits = await store.search(query, ["kb"], mode="dense", top_k=3)
    assert hits[0].document_id == "eiffel"
    assert [h.rank for h in hits] == [1, 2, 3]
    assert 0.3 < hits[0].score <= 1.0
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert "eiffel" not in _ids(await store.search(query, ["kb"], mode="lexical"))


async def test_lexical_finds_exact_terms(store: KnowledgeStore) -> None:
    await _loaded(store)
    hits = await store.search("XJ4711", ["kb"], mode="lexical")
    assert _ids(hits) == ["errors"]
    assert hits[0].score > 0 and hits[0].rank == 1
    assert hits[0].text == CORPUS[5].text and (hits[0].start, hits[0].end) == (
        0,
        len(CORPUS[5].text),
    )
    hits = await store.search("borrow checker ownership", ["kb"], mode="lexical")
    assert _ids(hits)[0] == "rust"
    # stemming: "collectors" finds "collector"; stop words alone match nothing
    assert _ids(await store.search("garbage collectors", ["kb"], mode="lexical")) == ["rust"]
    assert await store.search("the of and is", ["kb"], mode="lexical") == []
    assert await store.search("'\"*()^:-", ["kb"], mode="lexical") == []


async def test_hybrid_fuses_dense_and_lexical(store: KnowledgeStore) -> None:
    await _loaded(store)
    hits = await store.search("XJ4711 connection refused", ["kb"], mode="hybrid", top_k=6)
    assert hits[0].document_id == "errors"
    # found by both legs at rank 1: the best possible fused score
    assert hits[0].score == pytest.approx(2 * RRF_TOP)
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert all(0 < h.score <= 2 * RRF_TOP for h in hits)
    # a semantic-only question still works in hybrid mode
    assert (await store.search("How do plants make sugar?", ["kb"], top_k=1))[0].document_id == (
        "photosynthesis"
    )


async def test_top_k_and_score_threshold(store: KnowledgeStore) -> None:
    await _loaded(store)
    assert len(await store.search("programming language", ["kb"], mode="dense", top_k=2)) == 2
    assert len(await store.search("programming language", ["kb"], mode="dense", top_k=50)) == 6
    everything = await store.search("programming language", ["kb"], mode="dense", top_k=6)
    assert min(h.score for h in everything) < 0.25
    kept = await store.search(
        "programming language", ["kb"], mode="dense", top_k=6, score_threshold=0.25
    )
    assert kept and all(h.score >= 0.25 for h in kept)
    assert _ids(kept) == [h.document_id for h in everything if h.score >= 0.25]
    # hybrid: the threshold applies to the fused score (here: found by both legs)
    both = await store.search(
        "programming language", ["kb"], mode="hybrid", top_k=6, score_threshold=RRF_TOP + 1e-9
    )
    assert set(_ids(both)) <= {"python", "rust"} and both


async def test_metadata_filters_match_exactly(store: KnowledgeStore) -> None:
    await _loaded(store)

    async def found(wanted: dict[str, object], mode: str = "hybrid") -> set[str]:
        hits = await store.search(
            "programming language tower mountain plants error",
            ["kb"],
            mode=mode,  # type: ignore[arg-type]
            top_k=50,
            metadata_filter=wanted,  # type: ignore[arg-type]
        )
        return set(_ids(hits))

    for mode in ("dense", "lexical", "hybrid"):
        assert await found({"topic": "software"}, mode) <= {"python", "rust", "errors"}
        assert await found({"topic": "software", "public": True}, mode) <= {"python", "rust"}
    assert await found({"topic": "software"}, "dense") == {"python", "rust", "errors"}
    assert await found({"year": 1889.0}) == {"eiffel"}  # numbers compare numerically
    assert await found({"public": 1}) == set()  # a boolean is not a number
    assert await found({"year": None}) == {"photosynthesis"}  # null, not a missing key
    assert await found({"missing": "x"}) == set()
    assert await found({"topic": "Software"}) == set()


async def test_search_across_knowledge_bases_fuses_by_rank(store: KnowledgeStore) -> None:
    """Raw scores are not comparable across knowledge bases (corpus statistics, stuffed
    terms, different embedders): merging by them would let one base bury another's answer."""
    faq = [
        "How do I reset my password? Open settings, choose security, then reset password.",
        "Password rules: at least twelve characters. You can reset it any time.",
        "Forgot your password? Use the reset link on the login page.",
        "Why was my password reset email late? Mail can take five minutes.",
        "Can an admin reset a password for me? Yes, from the admin console.",
    ]
    notes = [
        "Meeting notes: the team discussed the quarterly roadmap and hiring.",
        "Password reset, password reset, password reset: the nightly job log repeats this.",
        "Reset password, reset password, reset password: a typing exercise for the course.",
        "Lunch menu for Friday: soup, salad and bread.",
        "The office plants need watering on Mondays.",
        "Release checklist: tag, build, publish, announce.",
        "Travel policy: book trains two weeks ahead.",
    ]
    await store.create_knowledge_base("faq")
    await store.create_knowledge_base("notes")
    await store.ingest("faq", [Document(f"faq{i}", t) for i, t in enumerate(faq)])
    await store.ingest("notes", [Document(f"note{i}", t) for i, t in enumerate(notes)])
    query = "how do I reset my password"

    best_faq = (await store.search(query, ["faq"], mode="lexical", top_k=5))[0]
    notes_hits = await store.search(query, ["notes"], mode="lexical", top_k=5)
    raw_merge = sorted([best_faq, *notes_hits], key=lambda h: -h.score)
    assert best_faq.document_id == "faq0"
    assert "faq0" not in _ids(raw_merge[:2])  # merging raw scores would drop the answer

    fused = await store.search(query, ["notes", "faq"], mode="lexical", top_k=2)
    assert {h.knowledge_base for h in fused} == {"notes", "faq"}
    assert "faq0" in _ids(fused)
    assert [h.rank for h in fused] == [1, 2]
    hybrid = await store.search(query, ["notes", "faq"], mode="hybrid", top_k=4)
    assert "faq0" in _ids(hybrid[:2])
    # in dense mode a threshold keeps an unrelated base from taking slots
    dense = await store.search(query, ["notes", "faq"], mode="dense", top_k=8, score_threshold=0.5)
    assert all(h.score >= 0.5 for h in dense) and "faq0" in _ids(dense[:2])
    assert set(_ids(dense)) - {f"faq{i}" for i in range(5)} <= {"note1", "note2"}
    # naming a base twice changes nothing
    assert _ids(await store.search(query, ["faq", "faq"], top_k=3)) == _ids(
        await store.search(query, ["faq"], top_k=3)
    )


async def test_documents_get_list_delete(store: KnowledgeStore) -> None:
    await _loaded(store)
    doc = await store.get_document("kb", "eiffel")
    assert (doc.text, doc.metadata, doc.chunk_count) == (CORPUS[0].text, CORPUS[0].metadata, 1)
    error = await _error(store.get_document("kb", "nope"))
    assert (error.code, error.reason) == (grpc.StatusCode.NOT_FOUND, "DOCUMENT_NOT_FOUND")
    assert error.metadata == {"knowledgeBase": "kb", "documentId": "nope"}

    page1 = await store.list_documents("kb", limit=4)
    page2 = await store.list_documents("kb", limit=4, after=page1[-1].id)
    assert [d.id for d in page1 + page2] == sorted(d.id for d in CORPUS)
    software = await store.list_documents("kb", metadata_filter={"topic": "software"})
    assert [d.id for d in software] == ["errors", "python", "rust"]

    assert await store.delete_document("kb", "rust") is True
    for mode in ("dense", "lexical", "hybrid"):
        hits = await store.search("borrow checker memory safety", ["kb"], mode=mode, top_k=50)  # type: ignore[arg-type]
        assert "rust" not in _ids(hits)
    error = await _error(store.delete_document("kb", "rust"))
    assert error.reason == "DOCUMENT_NOT_FOUND"
    assert await store.delete_document("kb", "rust", allow_missing=True) is False
    assert (await store.get_knowledge_base("kb")).document_count == len(CORPUS) - 1


async def test_long_documents_are_chunked_with_offsets(store: KnowledgeStore) -> None:
    await store.create_knowledge_base("kb", chunking=ChunkingOptions(32, 8))
    text = "\n\n".join(
        [
            "Glaciers form where snow accumulates faster than it melts. Over centuries the "
            "snow compacts into ice. The ice then flows downhill under its own weight.",
            "Coral reefs are built by colonies of tiny animals. They secrete calcium "
            "carbonate skeletons. Reefs shelter a quarter of all marine species.",
            "Volcanoes erupt when magma rises through the crust. Eruptions can be explosive "
            "or effusive. Volcanic soil is often very fertile.",
        ]
    )
    (result,) = await store.ingest("kb", [Document("earth", text, {"source": "notes.md"})])
    assert result.chunk_count >= 3
    hits = await store.search("coral reef animals", ["kb"], top_k=10)
    assert "Coral reefs" in hits[0].text
    for hit in hits:
        assert text[hit.start : hit.end] == hit.text
        assert hit.chunk_id.startswith("earth#") and hit.metadata == {"source": "notes.md"}


async def test_unicode_documents(store: KnowledgeStore) -> None:
    await store.create_knowledge_base("kb")
    docs = [
        Document("東京", "東京は日本の首都です。人口がとても多い都市です。", {"言語": "日本語"}),
        Document("café", "Le café est une boisson préparée à partir de grains torréfiés. ☕", {}),
        Document("emoji", "Rockets 🚀 launch satellites into orbit around the Earth.", {}),
    ]
    await store.ingest("kb", docs)
    assert (await store.get_document("kb", "東京")).text == docs[0].text
    (hit,) = await store.search("rocket launch to orbit", ["kb"], mode="dense", top_k=1)
    assert hit.document_id == "emoji"
    (hit,) = await store.search("boisson grains", ["kb"], mode="lexical", top_k=1)
    assert hit.document_id == "café"
    hits = await store.search("首都", ["kb"], mode="hybrid", metadata_filter={"言語": "日本語"})
    assert _ids(hits) == ["東京"]


async def test_empty_documents_and_bases(store: KnowledgeStore) -> None:
    await store.create_knowledge_base("kb")
    assert await store.search("anything at all", ["kb"]) == []
    (result,) = await store.ingest("kb", [Document("blank", "  \n\n ", {"k": "v"})])
    assert (result.status, result.chunk_count) == ("created", 0)
    assert (await store.get_document("kb", "blank")).chunk_count == 0
    assert await store.search("anything at all", ["kb"]) == []


async def test_reopening_sees_every_committed_write(backend: Backend) -> None:
    first = await backend.open()
    await _loaded(first)
    await first.delete_document("kb", "everest")
    before = await first.search("highest mountain in the Himalayas", ["kb"], mode="dense")
    await first.close()
    second = await backend.open()
    after = await second.search("highest mountain in the Himalayas", ["kb"], mode="dense")
    assert [(h.chunk_id, round(h.score, 5)) for h in after] == [
        (h.chunk_id, round(h.score, 5)) for h in before
    ]
    assert "everest" not in _ids(after)
    assert (await second.get_knowledge_base("kb")).document_count == len(CORPUS) - 1


async def test_concurrent_ingest_and_search(store: KnowledgeStore) -> None:
    await store.create_knowledge_base("kb")
    docs = [
        Document(f"d{i}", f"Note {i}: the {i}-th shipment of widgets arrived.") for i in range(24)
    ]

    async def ingest(i: int) -> None:
        await store.ingest("kb", docs[i : i + 3])

    async def search() -> None:
        for hit in await store.search("widgets shipment", ["kb"], top_k=10):
            assert hit.document_id.startswith("d")

    async with asyncio.timeout(SHORT_TIMEOUT):
        await asyncio.gather(*(ingest(i) for i in range(0, 24, 3)), *(search() for _ in range(8)))
    assert (await store.get_knowledge_base("kb")).document_count == 24
    assert len(await store.search("widgets shipment", ["kb"], mode="dense", top_k=50)) == 24


async def test_searches_see_the_old_or_the_new_version(store: KnowledgeStore) -> None:
    await store.create_knowledge_base("kb", chunking=ChunkingOptions(16, 0))
    versions = [
        " ".join(f"Version {v} sentence {i} mentions zeppelins." for i in range(6)) for v in "AB"
    ]
    await store.ingest("kb", [Document("doc", versions[0])])

    async def flip() -> None:
        for n in range(6):
            await store.ingest("kb", [Document("doc", versions[(n + 1) % 2])])

    async def look() -> None:
        for _ in range(12):
            hits = await store.search("zeppelins", ["kb"], mode="lexical", top_k=50)
            assert len({h.text.split()[1] for h in hits}) == 1  # one version, never a mix
            assert len(hits) == 3  # all chunks of that version

    async with asyncio.timeout(SHORT_TIMEOUT):
        await asyncio.gather(flip(), look())


class _Renamed:
    """The same vectors under another model name: the store must refuse to mix them."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner

    @property
    def name(self) -> str:
        return "some-other-model"

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    async def embed(self, texts: Sequence[str]) -> Vectors:
        return await self.inner.embed(texts)


async def test_vectors_of_another_embedder_are_refused(
    backend: Backend, embedder: Embedder
) -> None:
    await _loaded(await backend.open())
    other = await backend.open(_Renamed(embedder))
    for call in (other.search("tower", ["kb"], mode="dense"), other.ingest("kb", CORPUS[:1])):
        error = await _error(call)
        assert (error.code, error.reason) == (
            grpc.StatusCode.FAILED_PRECONDITION,
            "EMBEDDER_MISMATCH",
        )
        assert error.metadata["storedEmbedder"] == embedder.name
    # lexical search needs no vectors
    assert _ids(await other.search("Eiffel", ["kb"], mode="lexical")) == ["eiffel"]
    await other.create_knowledge_base("mine")
    assert [r.status for r in await other.ingest("mine", CORPUS[:1])] == ["created"]
