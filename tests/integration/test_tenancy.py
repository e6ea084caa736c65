"""Tenancy of every id-taking RPC, beyond get, delete, search, list and ingest (those are in
test_auth.py): another principal cannot update, delete-all, add to or read a user's
memories, cannot delete a document or a knowledge base it may only read or not at all, and
cannot touch a session of another principal while its reply runs.

One test per negative case, each on real servers with real tokens; every refusal asserts its
code and reason, and that the data it aimed at is unchanged."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2

from hookmesh.client import AgentClient, AgentClientError, MemoryClient, RetrievalClient
from hookmesh.errors import field_violations_of, reason_of, status_of
from hookmesh.memory import MemoryScope
from hookmesh.retrieval import Document
from hookmesh.services.agent import load_config, start_agent_service
from hookmesh.services.memory import load_memory_config, start_memory_service
from hookmesh.services.retrieval import load_retrieval_config, start_retrieval_service
from hookmesh.v1 import retrieval_pb2, retrieval_pb2_grpc
from tests.agent_helpers import SHORT_TIMEOUT
from tests.service_tools import GateState

pytestmark = pytest.mark.timeout(60)

TOKENS = "alice:tok-alice,bob:tok-bob,carol:tok-carol,root:tok-root"
AUTH = {"token_env": "HOOKMESH_TEST_TOKENS"}


@pytest.fixture(autouse=True)
def tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOKMESH_TEST_TOKENS", TOKENS)


async def _refused(call: Any) -> tuple[grpc.StatusCode, str]:
    """The code and reason of a client call that must fail."""
    with pytest.raises(AgentClientError) as caught:
        await call
    return caught.value.code, caught.value.reason


DENIED = (grpc.StatusCode.PERMISSION_DENIED, "USER_NOT_ALLOWED")
NOT_GRANTED = (grpc.StatusCode.PERMISSION_DENIED, "KNOWLEDGE_BASE_NOT_GRANTED")
NOT_FOUND = (grpc.StatusCode.NOT_FOUND, "SESSION_NOT_FOUND")


# --- memory ----------------------------------------------------------------------------------


@pytest.fixture
async def memories(tmp_path: Path) -> AsyncIterator[tuple[MemoryClient, MemoryClient, str]]:
    """A memory service holding one fact of Alice's: Alice's client, Bob's, the fact's id."""
    config = load_memory_config(None, store=f"sqlite:///{tmp_path}/memory.db", auth=AUTH)
    running = await start_memory_service(config, address="127.0.0.1:0")
    target = f"127.0.0.1:{running.port}"
    try:
        async with (
            MemoryClient(target, timeout=SHORT_TIMEOUT, token="tok-alice") as alice,
            MemoryClient(target, timeout=SHORT_TIMEOUT, token="tok-bob") as bob,
        ):
            added = await alice.add(MemoryScope("alice"), facts=["Alice's PIN is 4711."])
            yield alice, bob, added.memories[0].memory.id
    finally:
        await running.stop(None)


async def _alice_unchanged(alice: MemoryClient, memory_id: str) -> None:
    page = await alice.list(MemoryScope("alice"))
    assert [(m.id, m.text) for m in page.memories] == [(memory_id, "Alice's PIN is 4711.")]


async def test_another_principal_cannot_update_a_users_memory(memories: Any) -> None:
    alice, bob, memory_id = memories
    assert await _refused(bob.update("alice", memory_id, text="PIN 0000")) == DENIED
    await _alice_unchanged(alice, memory_id)


async def test_another_principal_cannot_delete_all_of_a_users_memories(memories: Any) -> None:
    alice, bob, memory_id = memories
    assert await _refused(bob.delete_all(MemoryScope("alice"))) == DENIED
    await _alice_unchanged(alice, memory_id)


async def test_another_principal_cannot_read_a_users_memory(memories: Any) -> None:
    _, bob, memory_id = memories
    assert await _refused(bob.get("alice", memory_id)) == DENIED
    assert await _refused(bob.list(MemoryScope("alice"))) == DENIED


async def test_another_principal_cannot_add_to_a_users_memories(memories: Any) -> None:
    alice, bob, memory_id = memories
    assert await _refused(bob.add(MemoryScope("alice"), facts=["Alice owes Bob."])) == DENIED
    await _alice_unchanged(alice, memory_id)


async def test_a_users_own_id_in_another_scope_is_not_found(memories: Any) -> None:
    """Bob naming himself and Alice's memory id: the id is not his, so it does not exist."""
    alice, bob, memory_id = memories
    code, reason = await _refused(bob.update("bob", memory_id, text="mine now"))
    assert (code, reason) == (grpc.StatusCode.NOT_FOUND, "MEMORY_NOT_FOUND")
    assert await _refused(bob.delete("bob", memory_id)) == (code, reason)
    assert await bob.delete_all(MemoryScope("bob")) == 0
    await _alice_unchanged(alice, memory_id)


# --- retrieval -------------------------------------------------------------------------------


@asynccontextmanager
async def _retrieval(
    tmp_path: Path, access: dict[str, Any] | None = None
) -> AsyncIterator[dict[str, RetrievalClient]]:
    """A retrieval service with `access` grants (none: everything allowed) whose
    ``handbook`` holds one document (created by Alice); clients of Alice, Bob, Carol and
    root by name."""
    config = load_retrieval_config(
        None, store=f"sqlite:///{tmp_path}/kb.db", auth=AUTH, access=access or {}
    )
    running = await start_retrieval_service(config, address="127.0.0.1:0")
    target = f"127.0.0.1:{running.port}"
    try:
        async with AsyncExitStack() as stack:
            clients = {
                name: await stack.enter_async_context(
                    RetrievalClient(target, timeout=SHORT_TIMEOUT, token=f"tok-{name}")
                )
                for name in ("alice", "bob", "carol", "root")
            }
            await clients["alice"].create_knowledge_base("handbook")
            await clients["alice"].ingest(
                "handbook", [Document("pay", "Salaries are paid monthly.")]
            )
            yield clients
    finally:
        await running.stop(None)


@pytest.fixture
async def bases(tmp_path: Path) -> AsyncIterator[dict[str, RetrievalClient]]:
    """Alice writes ``handbook``, Bob only reads it (and writes ``faq``), Carol has no grant
    and root may write everything."""
    access = {
        "alice": {"write": ["handbook"]},
        "bob": {"read": ["handbook"], "write": ["faq"]},
        "root": {"write": ["*"]},
    }
    async with _retrieval(tmp_path, access) as clients:
        yield clients


async def _handbook_intact(alice: RetrievalClient) -> None:
    assert (await alice.get_document("handbook", "pay")).text == "Salaries are paid monthly."


@pytest.mark.parametrize("size", [0, 1, 100])  # the default, the least, the most
async def test_a_user_lists_their_own_documents_only(
    bases: dict[str, RetrievalClient], size: int
) -> None:
    """Alice and Bob (sorting before and after ``anonymous``, the caller of a service without
    credentials, who owns nothing) each see what they ingested, in pages of up to 100."""
    bob = bases["bob"]
    await bob.create_knowledge_base("faq")
    await bob.ingest("faq", [Document("q1", "Bob asks."), Document("q2", "Bob asks again.")])
    for name, owned in (("alice", [("handbook", "pay")]), ("bob", [("faq", "q1"), ("faq", "q2")])):
        found: list[tuple[str, str]] = []
        token = ""
        while True:
            docs, token = await bases[name].list_user_documents(page_size=size, page_token=token)
            found += [(d.knowledge_base, d.id) for d in docs]
            if not token:
                break
        assert found == owned


async def test_a_page_of_user_documents_holds_20_by_default(
    bases: dict[str, RetrievalClient],
) -> None:
    alice = bases["alice"]
    await alice.ingest("handbook", [Document(f"n{i}", f"Note {i}.") for i in range(20)])
    docs, token = await alice.list_user_documents()  # 21 of Alice's, with "pay"
    assert (len(docs), bool(token)) == (20, True)
    rest, last = await alice.list_user_documents(page_token=token)
    assert (len(rest), last) == (1, "")


@pytest.mark.parametrize("size", [-1, 101])
async def test_a_page_of_user_documents_beyond_its_bounds_is_refused(
    bases: dict[str, RetrievalClient], size: int
) -> None:
    refused = await _refused(bases["alice"].list_user_documents(page_size=size))
    assert refused == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_SCHEMA")


@pytest.mark.parametrize("cursor", [[1, "pay"], ["handbook", 1], ["handbook"], "x", 1])
async def test_a_page_token_no_page_returned_is_refused(
    bases: dict[str, RetrievalClient], cursor: Any
) -> None:
    token = base64.urlsafe_b64encode(json.dumps(cursor).encode()).decode()
    refused = await _refused(bases["alice"].list_user_documents(page_token=token))
    assert refused == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_SCHEMA")


async def test_a_user_a_gateway_names_anonymous_owns_nothing(tmp_path: Path) -> None:
    """``anonymous`` is the caller of a service that checks no credentials, whose documents
    are no one's: a gateway naming that user lists and erases none of them."""
    auth = {**AUTH, "trusted_gateways": ["root"]}
    config = load_retrieval_config(None, store=f"sqlite:///{tmp_path}/kb.db", auth=auth)
    running = await start_retrieval_service(config, address="127.0.0.1:0")
    as_anonymous = (("authorization", "Bearer tok-root"), ("x-hookmesh-user", "anonymous"))

    async def one_document() -> AsyncIterator[retrieval_pb2.IngestRequest]:
        document = retrieval_pb2.Document(id="d", text="Whose is this?")
        yield retrieval_pb2.IngestRequest(knowledge_base="kb", document=document)

    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
            await stub.CreateKnowledgeBase(
                retrieval_pb2.CreateKnowledgeBaseRequest(name="kb"),
                metadata=as_anonymous,
                timeout=SHORT_TIMEOUT,
            )
            ingested = await stub.Ingest(
                one_document(), metadata=as_anonymous, timeout=SHORT_TIMEOUT
            )
            assert list(ingested.ingested_ids) == ["d"]
            listed = await stub.ListUserDocuments(
                retrieval_pb2.ListUserDocumentsRequest(),
                metadata=as_anonymous,
                timeout=SHORT_TIMEOUT,
            )
            deleted = await stub.DeleteUserDocuments(
                retrieval_pb2.DeleteUserDocumentsRequest(),
                metadata=as_anonymous,
                timeout=SHORT_TIMEOUT,
            )
            kept = await stub.GetDocument(
                retrieval_pb2.GetDocumentRequest(knowledge_base="kb", document_id="d"),
                metadata=as_anonymous,
                timeout=SHORT_TIMEOUT,
            )
        assert (list(listed.documents), deleted.deleted_count) == ([], 0)
        assert kept.document.text == "Whose is this?"
    finally:
        await running.stop(None)


async def test_a_user_erases_their_own_documents_only(bases: dict[str, RetrievalClient]) -> None:
    alice, bob = bases["alice"], bases["bob"]
    await bob.create_knowledge_base("faq")
    await bob.ingest("faq", [Document("q1", "Bob asks.")])
    assert await alice.delete_user_documents() == 1
    assert await _refused(alice.get_document("handbook", "pay")) == (
        grpc.StatusCode.NOT_FOUND,
        "DOCUMENT_NOT_FOUND",
    )
    assert (await bob.get_document("faq", "q1")).text == "Bob asks."
    assert await bob.delete_user_documents() == 1
    assert await bob.delete_user_documents() == 0


async def test_a_read_grant_cannot_delete_a_document(bases: dict[str, RetrievalClient]) -> None:
    bob = bases["bob"]
    assert (await bob.get_document("handbook", "pay")).text == "Salaries are paid monthly."
    assert await _refused(bob.delete_document("handbook", "pay")) == NOT_GRANTED
    await _handbook_intact(bases["alice"])


async def test_a_read_grant_cannot_delete_the_knowledge_base(
    bases: dict[str, RetrievalClient],
) -> None:
    assert await _refused(bases["bob"].delete_knowledge_base("handbook")) == NOT_GRANTED
    await _handbook_intact(bases["alice"])


async def test_a_read_grant_cannot_ingest(bases: dict[str, RetrievalClient]) -> None:
    bob = bases["bob"]
    assert await _refused(bob.ingest("handbook", [Document("x", "Bob was here.")])) == NOT_GRANTED
    assert [h.document_id for h in await bob.search("Bob was here", ["handbook"])] != ["x"]


@pytest.mark.parametrize("other", ["handbook", "archive"])  # sorting after and before "faq"
async def test_an_ingest_stream_cannot_switch_to_a_base_it_may_not_write(
    bases: dict[str, RetrievalClient], other: str
) -> None:
    """Bob writes ``faq``: a stream that starts there and then names another base is refused
    (one stream, one base), and nothing of it lands in ``handbook``."""
    bob = bases["bob"]
    await bob.create_knowledge_base("faq")

    async def requests() -> AsyncIterator[retrieval_pb2.IngestRequest]:
        for base, doc_id in (("faq", "q1"), (other, "planted")):
            yield retrieval_pb2.IngestRequest(
                knowledge_base=base,
                document=retrieval_pb2.Document(id=doc_id, text="Bob planted this."),
            )

    async with grpc.aio.insecure_channel(bob.target) as channel:
        stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.Ingest(
                requests(),
                timeout=SHORT_TIMEOUT,
                metadata=(("authorization", "Bearer tok-bob"),),
            )
    status = status_of(caught.value)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert status is not None and [v.field for v in field_violations_of(status)] == [
        "knowledge_base"
    ]
    hits = await bases["alice"].search("Bob planted this", ["handbook"], mode="lexical")
    assert [h.document_id for h in hits] == []
    await _handbook_intact(bases["alice"])


async def test_no_grant_cannot_delete_a_knowledge_base(bases: dict[str, RetrievalClient]) -> None:
    assert await _refused(bases["carol"].delete_knowledge_base("handbook")) == NOT_GRANTED
    await _handbook_intact(bases["alice"])


async def test_a_write_grant_elsewhere_cannot_create_a_knowledge_base(
    bases: dict[str, RetrievalClient],
) -> None:
    """Bob writes ``faq`` only: creating ``wiki`` is refused, creating ``faq`` is not."""
    bob = bases["bob"]
    assert await _refused(bob.create_knowledge_base("wiki")) == NOT_GRANTED
    await bob.create_knowledge_base("faq")
    assert [kb.name for kb in await bases["root"].list_knowledge_bases()] == ["faq", "handbook"]


async def test_an_unlisted_principal_may_do_nothing(bases: dict[str, RetrievalClient]) -> None:
    carol = bases["carol"]
    assert await carol.list_knowledge_bases() == []
    assert await carol.search("salaries", []) == []
    assert await _refused(carol.search("salaries", ["handbook"])) == NOT_GRANTED
    assert await _refused(carol.get_document("handbook", "pay")) == NOT_GRANTED
    assert await _refused(carol.delete_document("handbook", "pay")) == NOT_GRANTED
    assert await _refused(carol.create_knowledge_base("mine")) == NOT_GRANTED
    await _handbook_intact(bases["alice"])


async def test_a_wildcard_write_grant_reads_and_writes_every_base(
    bases: dict[str, RetrievalClient],
) -> None:
    root = bases["root"]
    assert [h.document_id for h in await root.search("salaries", ["handbook"])] == ["pay"]
    await root.delete_document("handbook", "pay")
    assert await root.search("salaries", []) == []


async def test_an_over_long_name_is_clipped_in_the_refusal(
    bases: dict[str, RetrievalClient],
) -> None:
    """The refusal echoes at most 64 characters of the name, in its message and metadata."""
    name = "k" * 100
    async with grpc.aio.insecure_channel(bases["carol"].target) as channel:
        stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.CreateKnowledgeBase(
                retrieval_pb2.CreateKnowledgeBaseRequest(name=name),
                timeout=SHORT_TIMEOUT,
                metadata=(("authorization", "Bearer tok-carol"),),
            )
    status = status_of(caught.value)
    assert status is not None and reason_of(status) == "KNOWLEDGE_BASE_NOT_GRANTED"
    info = error_details_pb2.ErrorInfo()
    status.details[0].Unpack(info)
    assert dict(info.metadata) == {"knowledgeBase": "k" * 64, "operation": "write"}
    assert f"'{'k' * 64}'" in status.message


async def test_without_grants_every_principal_may_do_everything(tmp_path: Path) -> None:
    """No `access:` at all (one-user and loopback deployments): nothing is refused."""
    async with _retrieval(tmp_path) as clients:
        alice, bob = clients["alice"], clients["bob"]
        assert [kb.name for kb in await bob.list_knowledge_bases()] == ["handbook"]
        assert [h.document_id for h in await bob.search("salaries", [])] == ["pay"]
        await bob.delete_document("handbook", "pay")
        await bob.delete_knowledge_base("handbook")
        assert await alice.list_knowledge_bases() == []


# --- agent sessions --------------------------------------------------------------------------


@pytest.fixture
async def agent(tmp_path: Path) -> AsyncIterator[str]:
    """An agent service whose reply waits at the gate tool until the test releases it."""
    GateState.reset()
    config = load_config(
        None,
        store=f"sqlite:///{tmp_path}/agent.db",
        auth=AUTH,
        tools=["tests.service_tools:gate"],
        models={
            "default": {
                "type": "scripted",
                "turns": [{"tool_calls": [{"name": "gate", "arguments": {}}]}, "done", "done"],
            }
        },
    )
    service = await start_agent_service(config, address="127.0.0.1:0")
    try:
        yield f"127.0.0.1:{service.port}"
    finally:
        GateState.release.set()
        await service.stop(None)


async def test_another_principal_leaves_a_running_reply_alone(agent: str) -> None:
    """While Alice's reply runs, Bob's Interrupt, GetSession and DeleteSession on its id
    answer NOT_FOUND (as for any id he does not own), and her reply completes untouched."""
    async with (
        AgentClient(agent, timeout=SHORT_TIMEOUT, token="tok-alice") as alice,
        AgentClient(agent, timeout=SHORT_TIMEOUT, token="tok-bob") as bob,
    ):
        running = asyncio.create_task(_events(alice.reply("go", session_id="plans")))
        async with asyncio.timeout(SHORT_TIMEOUT):
            await GateState.started.wait()
        assert await _refused(bob.interrupt("plans")) == NOT_FOUND
        assert await _refused(bob.get_session("plans")) == NOT_FOUND
        assert await _refused(bob.delete_session("plans")) == NOT_FOUND
        assert (await alice.get_session("plans")).status == "running"
        with pytest.raises(AgentClientError) as busy:
            await alice.text("again", session_id="plans")  # her own id is busy, though
        assert (busy.value.code, busy.value.reason) == (
            grpc.StatusCode.FAILED_PRECONDITION,
            "SESSION_BUSY",
        )
        assert busy.value.message.startswith("session plans is already replying")
        GateState.release.set()
        events = await asyncio.wait_for(running, SHORT_TIMEOUT)
        assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
        assert (await alice.get_session("plans")).status == "idle"


async def test_a_running_reply_does_not_make_another_principals_id_busy(agent: str) -> None:
    """Bob replying on the id of Alice's running reply gets his own session, not
    SESSION_BUSY: the claim is per owner, so ids say nothing across principals."""
    async with (
        AgentClient(agent, timeout=SHORT_TIMEOUT, token="tok-alice") as alice,
        AgentClient(agent, timeout=SHORT_TIMEOUT, token="tok-bob") as bob,
    ):
        running = asyncio.create_task(_events(alice.reply("go", session_id="plans")))
        async with asyncio.timeout(SHORT_TIMEOUT):
            await GateState.started.wait()
        assert await bob.text("me too", session_id="plans") == "done"
        assert (await alice.get_session("plans")).status == "running"
        theirs = await bob.get_session("plans")
        assert (theirs.status, len(theirs.context)) == ("idle", 2)
        GateState.release.set()
        events = await asyncio.wait_for(running, SHORT_TIMEOUT)
        assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]


async def _events(stream: Any) -> list[Any]:
    return [e async for e in stream]
