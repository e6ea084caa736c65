"""The memory store contract on SQLite and PostgreSQL, with real embeddings: merging, hybrid
search, scopes, isolation, paging, extraction, bad input, reopening."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import grpc
import pytest

from hookmesh.errors import HookmeshError, SchemaError
from hookmesh.memory import MemoryScope, MemoryStore
from hookmesh.models import ScriptedChatModel, ScriptedTurn
from hookmesh.retrieval import Document, Embedder
from hookmesh.schema import Message, MessageKind, make_assistant, make_user_text
from tests.integration.memory.conftest import MemoryBackend

pytestmark = pytest.mark.timeout(60)
SHORT_TIMEOUT = 30.0

ALICE = MemoryScope("alice")
FACTS = [
    "The user is vegetarian.",
    "The user lives in Lisbon and works as a nurse.",
    "The user's daughter Mia plays the violin.",
    "The user is training for the Porto marathon in October.",
    "The user's router shows error code XJ4711 after storms.",
    "Kowalczyk does the user's taxes every spring.",
]


async def _error(call: Any) -> HookmeshError:
    with pytest.raises(HookmeshError) as caught:
        async with asyncio.timeout(SHORT_TIMEOUT):
            await call
    return caught.value


def _fields(error: HookmeshError) -> list[str]:
    assert isinstance(error, SchemaError)
    return [v.field for v in error.violations]


def _model(answer: str | None = None, error: str = "") -> ScriptedChatModel:
    def script(messages: Sequence[Message], tools: Any, tool_choice: str) -> ScriptedTurn:
        return ScriptedTurn(text=answer or "", error=error)

    return ScriptedChatModel(script)


async def test_facts_are_stored_with_their_scope_and_metadata(store: MemoryStore) -> None:
    scope = MemoryScope("alice", "cook", "s1")
    result = await store.add(scope, facts=FACTS[:2], metadata={"source": "test", "n": 3})
    assert result.extraction == "none"
    assert [m.outcome for m in result.memories] == ["created", "created"]
    first = result.memories[0].memory
    assert first.text == FACTS[0] and first.scope == scope and first.origin == "fact"
    assert first.metadata == {"source": "test", "n": 3}
    assert first.create_time == first.update_time and first.source_message_ids == ()
    assert await store.get("alice", first.id) == first
    assert first.id < result.memories[1].memory.id  # ids sort by creation


async def test_a_near_duplicate_is_merged_not_stored_twice(store: MemoryStore) -> None:
    scope = MemoryScope("alice", "cook")
    first = (await store.add(scope, facts=["The user is vegetarian."], metadata={"a": 1})).memories
    msg = make_user_text("flat", "The user is a vegetarian.", id="m-7")
    again = await store.add(scope, facts=["The user is a vegetarian."], metadata={"b": True})
    assert again.memories[0].outcome == "merged"
    merged = again.memories[0].memory
    assert merged.id == first[0].memory.id and merged.text == "The user is vegetarian."
    assert merged.metadata == {"a": 1, "b": True}
    assert merged.update_time > merged.create_time == first[0].memory.create_time
    # A user turn stored verbatim merges too, and brings its message id as a source.
    turn = await store.add(scope, messages=[msg])
    assert turn.memories[0].outcome == "merged" and turn.memories[0].memory.source_message_ids == (
        "m-7",
    )
    # A different fact, or the same fact from another agent, is a memory of its own.
    other = await store.add(scope, facts=["The user eats fish on Fridays."])
    elsewhere = await store.add(MemoryScope("alice", "coach"), facts=["The user is vegetarian."])
    assert other.memories[0].outcome == elsewhere.memories[0].outcome == "created"
    texts = [m.text for m in (await store.list(MemoryScope("alice"))).memories]
    assert texts == [
        "The user is vegetarian.",
        "The user eats fish on Fridays.",
        "The user is vegetarian.",
    ]


async def test_concurrent_adds_of_one_fact_leave_one_memory(store: MemoryStore) -> None:
    async with asyncio.timeout(SHORT_TIMEOUT):
        results = await asyncio.gather(
            *(store.add(ALICE, facts=["The user is allergic to peanuts."]) for _ in range(5))
        )
    assert sorted(r.memories[0].outcome for r in results) == ["created"] + ["merged"] * 4
    assert len((await store.list(ALICE)).memories) == 1


async def test_the_merge_threshold_is_configurable(backend: MemoryBackend) -> None:
    never = await backend.open(dedup_threshold=1.5)
    await never.add(ALICE, facts=["The user is vegetarian."])
    again = await never.add(ALICE, facts=["The user is vegetarian."])
    assert again.memories[0].outcome == "created"
    assert len((await never.list(ALICE)).memories) == 2


async def test_hybrid_search_finds_by_meaning_and_by_keyword(
    store: MemoryStore, embedder: Embedder
) -> None:
    await store.add(ALICE, facts=FACTS)
    hits = await store.search("what food should I cook for the user?", ALICE, top_k=2)
    assert hits[0].memory.text == FACTS[0] and [h.rank for h in hits] == [1, 2]
    assert hits[0].similarity is not None and hits[0].score > hits[1].score
    # A name only the keyword ranking ties to its memory: by meaning the question is about
    # the violin, so the meaning ranking alone would answer with Mia's fact.
    question = "who teaches her fiddle? Kowalczyk"
    vectors = await embedder.embed([question, FACTS[2], FACTS[5]])
    assert float(vectors[0] @ vectors[1]) > float(vectors[0] @ vectors[2])
    name = await store.search(question, ALICE, top_k=1)
    assert [h.memory.text for h in name] == [FACTS[5]]
    # A cosine floor keeps only what the meaning ranking found above it.
    floor = await store.search("which instrument does the child play", ALICE, score_threshold=0.3)
    assert [h.memory.text for h in floor] == [FACTS[2]]
    assert all(h.similarity is not None and h.similarity >= 0.3 for h in floor)
    assert await store.search("violin", MemoryScope("nobody")) == []


async def test_an_agent_scope_narrows_reads_and_a_user_scope_spans_agents(
    store: MemoryStore,
) -> None:
    await store.add(MemoryScope("alice", "cook"), facts=["The user loves spicy curries."])
    await store.add(MemoryScope("alice", "coach"), facts=["The user runs five times a week."])
    await store.add(MemoryScope("alice", None, "s9"), facts=["The user prefers short answers."])
    everything = await store.search("the user", ALICE, top_k=10)
    assert len(everything) == 3
    cook = await store.search("the user", MemoryScope("alice", "cook"), top_k=10)
    assert [h.memory.text for h in cook] == ["The user loves spicy curries."]
    session = await store.list(MemoryScope("alice", None, "s9"))
    assert [m.text for m in session.memories] == ["The user prefers short answers."]


async def test_users_are_isolated(store: MemoryStore) -> None:
    secret = (await store.add(ALICE, facts=["The user's bank is Banco Azul."])).memories[0].memory
    bob = MemoryScope("bob")
    await store.add(bob, facts=["The user likes chess."])
    assert [h.memory.scope.user_id for h in await store.search("bank", bob, top_k=10)] == ["bob"]
    assert [m.text for m in (await store.list(bob)).memories] == ["The user likes chess."]
    for call in (
        store.get("bob", secret.id),
        store.update("bob", secret.id, text="hijacked"),
        store.delete("bob", secret.id),
    ):
        error = await _error(call)
        assert (error.code, error.reason) == (grpc.StatusCode.NOT_FOUND, "MEMORY_NOT_FOUND")
    assert await store.delete_all(bob) == 1
    assert (await store.get("alice", secret.id)).text == secret.text


async def test_a_record_of_another_user_misfiled_in_a_users_base_stays_hidden(
    store: MemoryStore,
) -> None:
    """Each user's base is the boundary; the stored user id on every record is checked too,
    so a record copied into the wrong base (a bug, a hand-made import) is not read as the
    base owner's."""
    alices = (await store.add(ALICE, facts=["The user plays chess on Sundays."])).memories[0]
    bobs = (await store.add(MemoryScope("bob"), facts=["The user's PIN is 4921."])).memories[0]
    knowledge = store.knowledge
    base_of = {
        doc.id: kb.name
        for kb in await knowledge.list_knowledge_bases()
        for doc in await knowledge.list_documents(kb.name)
    }
    record = await knowledge.get_document(base_of[bobs.memory.id], bobs.memory.id)
    misfiled = Document(record.id, record.text, record.metadata)
    await knowledge.ingest(base_of[alices.memory.id], [misfiled])
    for call in (
        store.get("alice", record.id),
        store.update("alice", record.id, text="The user's PIN is 0000."),
    ):
        error = await _error(call)
        assert (error.code, error.reason) == (grpc.StatusCode.NOT_FOUND, "MEMORY_NOT_FOUND")
    assert [m.text for m in (await store.list(ALICE)).memories] == [
        "The user plays chess on Sundays."
    ]
    hits = await store.search("what is the PIN?", ALICE, top_k=10)
    assert [h.memory.scope.user_id for h in hits] == ["alice"]
    assert (await store.get("bob", record.id)).text == "The user's PIN is 4921."


async def test_listing_pages_oldest_first(store: MemoryStore) -> None:
    facts = [f"The user visited city number {i}." for i in range(7)]
    for fact in facts:  # one add each, so each is its own memory whatever their similarity
        await store.add(ALICE, facts=[fact])
    seen: list[str] = []
    token = ""
    pages = 0
    while True:
        page = await store.list(ALICE, page_size=3, page_token=token)
        seen += [m.text for m in page.memories]
        pages += 1
        token = page.next_page_token
        if not token:
            break
    merged = [m.memory.text for m in (await store.add(ALICE, facts=facts)).memories]
    assert pages == 3 and seen == facts[: len(seen)] and len(seen) == 7
    assert merged == facts  # all merged into the same memories


async def test_update_reindexes_and_delete_removes(store: MemoryStore) -> None:
    memory = (await store.add(ALICE, facts=["The user drives a red bicycle."])).memories[0].memory
    updated = await store.update("alice", memory.id, text="The user drives a blue tram.")
    assert updated.text == "The user drives a blue tram." and updated.id == memory.id
    assert updated.create_time == memory.create_time and updated.update_time > memory.update_time
    hits = await store.search("tram", ALICE, top_k=1)
    assert hits[0].memory.text == "The user drives a blue tram."
    assert await store.search("bicycle red", ALICE, score_threshold=0.9) == []
    retagged = await store.update("alice", memory.id, metadata={"checked": True})
    assert retagged.metadata == {"checked": True} and retagged.text == updated.text
    await store.delete("alice", memory.id)
    error = await _error(store.get("alice", memory.id))
    assert error.reason == "MEMORY_NOT_FOUND"
    assert (await _error(store.delete("alice", memory.id))).reason == "MEMORY_NOT_FOUND"


async def test_delete_all_of_an_agent_then_of_the_user(store: MemoryStore) -> None:
    await store.add(MemoryScope("alice", "cook"), facts=["The user loves curries."])
    await store.add(MemoryScope("alice", "coach"), facts=["The user runs daily."])
    await store.add(MemoryScope("alice", "coach"), facts=["The user swims on Sundays."])
    assert await store.delete_all(MemoryScope("alice", "coach")) == 2
    assert [m.text for m in (await store.list(ALICE)).memories] == ["The user loves curries."]
    assert await store.delete_all(ALICE) == 1
    assert await store.delete_all(ALICE) == 0
    again = await store.add(ALICE, facts=["The user came back."])
    assert again.memories[0].outcome == "created"


async def test_extraction_stores_the_models_facts(
    backend: MemoryBackend, kind: MessageKind
) -> None:
    seen: list[str] = []

    def script(messages: Sequence[Message], tools: Any, tool_choice: str) -> ScriptedTurn:
        seen.append("\n".join(str(m.content) for m in messages if m.kind == "flat"))
        return ScriptedTurn(
            text=json.dumps({"facts": ["The user is vegan.", " ", "The user is vegan."]})
        )

    store = await backend.open(model=ScriptedChatModel(script))
    turn = [
        make_user_text(kind, "I stopped eating anything from animals.", id="u1"),
        make_assistant(kind, "Noted: no animal products.", id="a1"),
    ]
    result = await store.add(MemoryScope("alice", "cook", "s1"), messages=turn)
    assert result.extraction == "extracted"
    assert [(m.memory.text, m.memory.origin) for m in result.memories] == [
        ("The user is vegan.", "extracted")
    ]
    assert result.memories[0].memory.source_message_ids == ("u1", "a1")
    assert "[user] I stopped eating" in seen[0] and "[assistant] Noted" in seen[0]


@pytest.mark.parametrize(
    "answer",
    ["Sure! The user likes tea.", '{"facts": "tea"}', '{"fact": ["tea"]}', "[1, 2]", ""],
)
async def test_malformed_extraction_stores_the_turn_verbatim(
    backend: MemoryBackend, answer: str
) -> None:
    store = await backend.open(model=_model(answer))
    turn = [
        make_user_text("agentic", "I drink green tea every morning.", id="u1"),
        make_assistant("agentic", "Lovely habit.", id="a1"),
    ]
    result = await store.add(ALICE, messages=turn)
    assert result.extraction == "fallback"
    assert [
        (m.memory.text, m.memory.origin, m.memory.source_message_ids) for m in result.memories
    ] == [("I drink green tea every morning.", "verbatim", ("u1",))]


async def test_a_failing_model_falls_back_and_a_fenced_answer_is_accepted(
    backend: MemoryBackend,
) -> None:
    failing = await backend.open(model=_model(error="model down"))
    result = await failing.add(ALICE, messages=[make_user_text("flat", "I am left-handed.")])
    assert result.extraction == "fallback" and result.memories[0].memory.origin == "verbatim"
    fenced = await backend.open(
        model=_model('```json\n{"facts": ["The user is left-handed."]}\n```')
    )
    result = await fenced.add(ALICE, messages=[make_user_text("flat", "I write with my left.")])
    assert result.extraction == "extracted"
    assert [m.memory.text for m in result.memories] == ["The user is left-handed."]


async def test_without_a_model_the_users_statements_are_stored_verbatim(
    store: MemoryStore,
) -> None:
    turn = [
        make_user_text("flat", "hi", id="u0"),
        make_user_text("flat", "Hi! My cat is called Pixel. Do you like cats?", id="u1"),
        make_assistant("flat", "Pixel is a great name! I do like cats.", id="a1"),
        make_user_text("agentic", "Thanks a lot!\nI also have a dog named Rex", id="u2"),
        make_user_text("flat", "what is my name"),
        make_user_text("flat", "   "),
    ]
    result = await store.add(ALICE, messages=turn)
    assert result.extraction == "no_model"
    assert [(m.memory.text, m.memory.source_message_ids) for m in result.memories] == [
        ("My cat is called Pixel.", ("u1",)),
        ("I also have a dog named Rex", ("u2",)),
    ]
    greeting = await store.add(ALICE, messages=[make_user_text("flat", "Hello there, thanks!")])
    assert greeting.extraction == "no_model" and greeting.memories == []


async def test_a_fact_longer_than_a_search_query_is_stored_and_merged(
    store: MemoryStore,
) -> None:
    pens = ", ".join(f"a vintage fountain pen numbered {i} from Lisbon" for i in range(120))
    long_fact = f"I collect {pens}."
    assert store.limits.max_query_chars < len(long_fact) <= store.limits.max_text_chars
    first = await store.add(ALICE, facts=[long_fact])
    again = await store.add(ALICE, messages=[make_user_text("flat", long_fact, id="u9")])
    assert first.memories[0].outcome == "created" and again.memories[0].outcome == "merged"
    assert (await store.get("alice", first.memories[0].memory.id)).text == long_fact


async def test_bad_requests_name_their_fields(store: MemoryStore) -> None:
    cases: list[tuple[Any, list[str]]] = [
        (store.add(MemoryScope(""), facts=["x"]), ["scope.user_id"]),
        (store.add(ALICE, facts=["ok", "  "]), ["facts[1]"]),
        (store.add(ALICE), ["facts"]),
        (store.add(ALICE, facts=["x"], messages=[make_user_text("flat", "y")]), ["facts"]),
        (store.add(ALICE, facts=["x"], metadata={"k": [1]}), ["metadata[k]"]),
        (store.add(ALICE, facts=["x" * 9000]), ["facts[0]"]),
        (store.search("food", ALICE, top_k=51), ["top_k"]),
        (store.search(" ", MemoryScope("a" * 200), top_k=-1, score_threshold=2), ["scope.user_id"]),
        (
            store.search(" ", ALICE, top_k=-1, score_threshold=2),
            ["query", "top_k", "score_threshold"],
        ),
        (store.list(ALICE, page_token="not-a-token"), ["page_token"]),
        (store.list(ALICE, page_size=501), ["page_size"]),
        (store.get("alice", "nope"), ["memory_id"]),
        (store.update("alice", "0" * 32), ["text"]),
        (store.update("", "0" * 32, text=""), ["user_id"]),
    ]
    for call, fields in cases:
        error = await _error(call)
        assert (error.code, error.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_SCHEMA")
        assert _fields(error) == fields


async def test_memories_survive_reopening_the_store(backend: MemoryBackend) -> None:
    first = await backend.open()
    added = await first.add(ALICE, facts=FACTS)
    await first.close()
    backend.opened.remove(first)
    again = await backend.open()
    assert [m.text for m in (await again.list(ALICE)).memories] == FACTS
    hits = await again.search("violin", ALICE, top_k=1)
    assert hits[0].memory == added.memories[2].memory
    merged = await again.add(ALICE, facts=[FACTS[0]])
    assert merged.memories[0].outcome == "merged"


async def test_bulk_import_skips_the_duplicate_check(store: MemoryStore) -> None:
    count = await store.import_memories(ALICE, [f"Fact number {i}." for i in range(300)], batch=128)
    assert count == 300
    page = await store.list(ALICE, page_size=500)
    assert len(page.memories) == 300 and page.next_page_token == ""
    hits = await store.search("Fact number 123", ALICE, top_k=3)
    assert "Fact number 123." in [h.memory.text for h in hits]


async def test_a_narrow_scope_finds_its_memories_under_many_of_another_agent(
    store: MemoryStore,
) -> None:
    crowd = [f"The user ate pizza number {i} in Rome." for i in range(70)]
    await store.import_memories(MemoryScope("alice", "b"), crowd)
    mine = "The user had a slice of pizza once."
    await store.add(MemoryScope("alice", "a"), facts=[mine])
    query = "Rome pizza number"
    wide = await store.search(query, ALICE, top_k=50)
    assert mine not in [h.memory.text for h in wide]  # so the narrowed legs must fall back
    narrow = await store.search(query, MemoryScope("alice", "a"), top_k=5)
    assert [h.memory.text for h in narrow] == [mine] and narrow[0].similarity is not None
    again = await store.add(
        MemoryScope("alice", "a"), facts=["The user ate pizza number 3 in Rome."]
    )
    assert again.memories[0].outcome == "created"  # agent b's copy is not agent a's memory
