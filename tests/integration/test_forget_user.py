"""`AdminService.ForgetUser`: a user's sessions, reply journals, A2A tasks and memories are
erased (checked in the databases themselves, not through the API), another user's stay, the
receipt counts what was made, a second call is a no-op; only admins may call, and a running
reply of the user refuses the call.

`AdminService.ExportUser`: the same stores' records of one user (as many as the databases
hold, with the words of the replies), none of another's, in bounded batches whatever the page
sizes; an unknown user exports nothing; the CLI writes them as JSON Lines."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import sqlite3
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from hookmesh.client import (
    AdminClient,
    AgentClient,
    AgentClientError,
    MemoryClient,
    RetrievalClient,
)
from hookmesh.memory import MemoryScope
from hookmesh.schema import ReplyStartEvent
from hookmesh.services.a2a._tasks import open_task_store
from hookmesh.services.agent import _export as exporting
from hookmesh.services.agent import load_config, start_agent_service
from hookmesh.services.memory import load_memory_config, start_memory_service
from hookmesh.services.retrieval import load_retrieval_config, start_retrieval_service
from hookmesh.v1 import admin_pb2, admin_pb2_grpc
from tests.agent_helpers import SHORT_TIMEOUT
from tests.forget_stack import FILE_MODEL, TOKENS, Stack, count_rows, count_sql, files_in, ingest
from tests.mesh_app import PARK, Gate
from tests.session_backends import SessionBackend

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
async def gate(tmp_path: Path) -> AsyncIterator[Gate]:
    async with Gate(tmp_path / "gate.sock") as opened:
        yield opened


@pytest.fixture
async def stack(
    session_backend: SessionBackend,
    tmp_path: Path,
    gate: Gate,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[Stack]:
    (tmp_path / "tokens").write_text(TOKENS)
    auth = {"token_file": str(tmp_path / "tokens")}
    memory_db = tmp_path / "memory.db"
    memory = await start_memory_service(
        load_memory_config(
            None,
            store=f"sqlite:///{memory_db}",
            auth={**auth, "trusted_gateways": ["agent"]},
            grace_seconds=0.5,
        ),
        address="127.0.0.1:0",
    )
    sqlite = session_backend.name == "sqlite"
    retrieval_url = f"sqlite:///{tmp_path}/kb.db" if sqlite else session_backend.url
    retrieval_namespace = f"{session_backend.namespace}_kb"
    retrieval = await start_retrieval_service(
        load_retrieval_config(
            None,
            store=retrieval_url,
            namespace=retrieval_namespace,
            auth={**auth, "trusted_gateways": ["agent"]},
            grace_seconds=0.5,
        ),
        address="127.0.0.1:0",
    )
    a2a_url = f"sqlite:///{tmp_path}/a2a.db" if sqlite else session_backend.url
    await (await open_task_store(a2a_url, max_tasks=1000)).close()  # as an A2A server starts
    monkeypatch.setenv("TEST_MEMORY_TOKEN", "agent-token")
    gated = {"type": "local", "import": "tests.mesh_app:GateMiddleware"}
    config = session_backend.config(
        auth=auth,
        admin_principals=["ops"],
        middlewares=[{**gated, "params": {"path": str(gate.path)}}],
        erasure={
            "a2a_task_store": a2a_url,
            "memory": f"127.0.0.1:{memory.port}",
            "memory_token_env": "TEST_MEMORY_TOKEN",
            "retrieval": f"127.0.0.1:{retrieval.port}",
            "retrieval_token_env": "TEST_MEMORY_TOKEN",
        },
    )
    agent = await start_agent_service(load_config(None, **config), address="127.0.0.1:0")
    try:
        yield Stack(
            agent,
            session_backend,
            a2a_url,
            memory_db,
            f"127.0.0.1:{memory.port}",
            f"127.0.0.1:{retrieval.port}",
            retrieval_url,
            retrieval_namespace,
        )
    finally:
        gate.open()
        await agent.stop(None)
        await memory.stop(None)
        await retrieval.stop(None)


async def _converse(stack: Stack, token: str, turns: int) -> list[str]:
    """`turns` replies of the token's user, each in a new session; their session ids."""
    sessions = []
    async with AgentClient(stack.target, timeout=SHORT_TIMEOUT, token=token) as client:
        for turn in range(turns):
            events = [e async for e in client.reply(f"remember turn {turn}")]
            assert isinstance(events[0], ReplyStartEvent)
            sessions.append(events[0].session_id)
    return sessions


async def _remember(stack: Stack, token: str, user: str, facts: list[str]) -> None:
    async with MemoryClient(stack.memory_target, timeout=SHORT_TIMEOUT, token=token) as memory:
        await memory.add(MemoryScope(user_id=user), facts=facts)


async def _task(stack: Stack, context_id: str) -> None:
    """A stored A2A task of one session, as the A2A server saves it."""
    from a2a.server.context import ServerCallContext
    from a2a.types import a2a_pb2

    opened = await open_task_store(stack.a2a_url, max_tasks=1000)
    try:
        task = a2a_pb2.Task(id=str(uuid.uuid4()), context_id=context_id)
        task.status.state = a2a_pb2.TASK_STATE_COMPLETED
        await opened.store.save(task, ServerCallContext())
    finally:
        await opened.close()


async def test_forget_erases_one_user_everywhere_and_nothing_of_another(
    stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    alice = await _converse(stack, "alice-token", 2)
    bob = await _converse(stack, "bob-token", 1)
    await _remember(stack, "alice-token", "alice", ["alice drinks green tea", "alice owns a cat"])
    await _remember(stack, "bob-token", "bob", ["bob cycles to work"])
    for session in alice:
        await _task(stack, session)
    await _task(stack, bob[0])
    await ingest(stack, "alice-token", "shared", {"a1": "alice plants tulips"})
    await ingest(stack, "alice-token", "diary", {"a2": "alice dreams of tulips"})
    await ingest(stack, "bob-token", "shared", {"b1": "bob plants tulips"})
    made = await count_rows(stack, "alice", alice)
    bob_before = await count_rows(stack, "bob", bob)
    assert made["agent.sessions"] == 2 and made["a2a.tasks"] == 2
    assert made["memory.memories"] == 2 and made["agent.reply_events"] > 0

    async with AdminClient(stack.target, timeout=SHORT_TIMEOUT, token="ops-token") as ops:
        with caplog.at_level(logging.INFO, logger="hookmesh.audit"):
            receipt = await ops.forget_user("alice")
        audited = [r.getMessage() for r in caplog.records if r.name == "hookmesh.audit"]
        again = await ops.forget_user("alice")

    assert receipt == [
        ("a2a.tasks", 2),
        ("agent.reply_events", made["agent.reply_events"]),
        ("agent.replies", made["agent.replies"]),
        ("agent.sessions", 2),
        ("retrieval.documents", 2),
        ("memory.memories", 2),
    ]
    assert await count_rows(stack, "alice", alice) == dict.fromkeys(made, 0)
    assert audited == [
        "forget user 'alice' by 'ops': " + ", ".join(f"{store}={count}" for store, count in receipt)
    ]
    assert await count_rows(stack, "bob", bob) == bob_before
    assert [count for _, count in again] == [0] * len(receipt)
    with sqlite3.connect(stack.memory_db) as db:
        (left,) = db.execute("SELECT count(*) FROM chunks WHERE text LIKE '%tea%'").fetchone()
    assert left == 0
    chunks = (
        "chunks"
        if stack.retrieval_url.startswith("sqlite")
        else (f"{stack.retrieval_namespace}.chunks")
    )
    sql = f"SELECT count(*) FROM {chunks} WHERE text LIKE %s"
    assert await count_sql(stack, stack.retrieval_url, sql, ("alice%",)) == 0
    assert await count_sql(stack, stack.retrieval_url, sql, ("bob%",)) == 1


async def test_only_admin_principals_may_forget(stack: Stack) -> None:
    sessions = await _converse(stack, "alice-token", 1)
    async with AdminClient(stack.target, timeout=SHORT_TIMEOUT, token="alice-token") as alice:
        with pytest.raises(AgentClientError) as refused:
            await alice.forget_user("bob")
    assert (refused.value.code, refused.value.reason) == (
        grpc.StatusCode.PERMISSION_DENIED,
        "ADMIN_ONLY",
    )
    assert (await count_rows(stack, "alice", sessions))["agent.sessions"] == 1


async def test_a_bad_user_id_is_invalid_argument(stack: Stack) -> None:
    async with AdminClient(stack.target, timeout=SHORT_TIMEOUT, token="ops-token") as ops:
        for bad in ("", "a\nb", "x" * 129):
            with pytest.raises(AgentClientError) as refused:
                await ops.forget_user(bad)
            assert (refused.value.code, refused.value.reason) == (
                grpc.StatusCode.INVALID_ARGUMENT,
                "INVALID_USER_ID",
            )
            assert [v.field for v in refused.value.violations] == ["user_id"]


async def test_a_running_reply_of_the_user_refuses_the_erasure(stack: Stack, gate: Gate) -> None:
    async with (
        AgentClient(stack.target, timeout=SHORT_TIMEOUT, token="alice-token") as client,
        AdminClient(stack.target, timeout=SHORT_TIMEOUT, token="ops-token") as ops,
    ):
        parked = client.reply(PARK)
        async with asyncio.timeout(SHORT_TIMEOUT):
            start = await anext(parked)
        assert isinstance(start, ReplyStartEvent)
        await gate.wait_for(1, SHORT_TIMEOUT)
        with pytest.raises(AgentClientError) as refused:
            await ops.forget_user("alice")
        assert (refused.value.code, refused.value.reason) == (
            grpc.StatusCode.FAILED_PRECONDITION,
            "USER_REPLY_RUNNING",
        )
        assert (await count_rows(stack, "alice", [start.session_id]))["agent.sessions"] == 1
        gate.open()
        async with asyncio.timeout(SHORT_TIMEOUT):
            _ = [e async for e in parked]
        await stack.agent.servicer.drain(SHORT_TIMEOUT)
        receipt = dict(await ops.forget_user("alice"))
    assert receipt["agent.sessions"] == 1
    assert await count_rows(stack, "alice", [start.session_id]) == dict.fromkeys(receipt, 0)


async def test_a_reply_running_on_another_replica_refuses_the_erasure(
    postgres_backend: SessionBackend, tmp_path: Path, gate: Gate
) -> None:
    (tmp_path / "tokens").write_text(TOKENS)
    gated = {"type": "local", "import": "tests.mesh_app:GateMiddleware"}
    config = postgres_backend.config(
        auth={"token_file": str(tmp_path / "tokens")},
        admin_principals=["ops"],
        middlewares=[{**gated, "params": {"path": str(gate.path)}}],
    )
    running = await start_agent_service(load_config(None, **config), address="127.0.0.1:0")
    other = await start_agent_service(load_config(None, **config), address="127.0.0.1:0")
    try:
        async with (
            AgentClient(
                f"127.0.0.1:{running.port}", timeout=SHORT_TIMEOUT, token="alice-token"
            ) as client,
            AdminClient(f"127.0.0.1:{other.port}", timeout=SHORT_TIMEOUT, token="ops-token") as ops,
        ):
            parked = client.reply(PARK)
            async with asyncio.timeout(SHORT_TIMEOUT):
                await anext(parked)
            await gate.wait_for(1, SHORT_TIMEOUT)
            with pytest.raises(AgentClientError) as refused:
                await ops.forget_user("alice")
            assert refused.value.reason == "USER_REPLY_RUNNING"
            gate.open()
            async with asyncio.timeout(SHORT_TIMEOUT):
                _ = [e async for e in parked]
            await running.servicer.drain(SHORT_TIMEOUT)
            assert dict(await ops.forget_user("alice"))["agent.sessions"] == 1
    finally:
        gate.open()
        await running.stop(None)
        await other.stop(None)


async def test_the_cli_prints_the_receipt(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    await _converse(stack, "alice-token", 1)
    monkeypatch.setenv("OPS_TOKEN", "ops-token")
    forget = ("admin", "forget", "--user", "alice", "--target", stack.target)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "hookmesh.cli", *forget, "--token-env", "OPS_TOKEN",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(SHORT_TIMEOUT * 3):
        out, err = await process.communicate()
    assert (process.returncode, err) == (0, b"")
    lines = out.decode().splitlines()
    assert lines[0] == "a2a.tasks: 0 deleted"
    assert "agent.sessions: 1 deleted" in lines
    assert lines[-1] == "forgot 'alice' in 6 stores"


async def _made(stack: Stack) -> tuple[list[str], list[str]]:
    """Alice's and Bob's data in every store: sessions from real replies, A2A tasks of
    their sessions, memories; their session ids."""
    alice = await _converse(stack, "alice-token", 2)
    bob = await _converse(stack, "bob-token", 1)
    await _remember(stack, "alice-token", "alice", ["alice drinks green tea", "alice owns a cat"])
    await _remember(stack, "bob-token", "bob", ["bob cycles to work"])
    for session in (*alice, *bob):
        await _task(stack, session)
    await ingest(stack, "alice-token", "shared", {"a1": "alice plants tulips"})
    await ingest(stack, "alice-token", "diary", {"a2": "alice dreams of tulips"})
    await ingest(stack, "bob-token", "shared", {"b1": "bob plants tulips"})
    return alice, bob


async def _exported(stack: Stack, user: str) -> list[tuple[str, dict[str, Any]]]:
    async with AdminClient(stack.target, timeout=SHORT_TIMEOUT, token="ops-token") as ops:
        return [(store, json.loads(line)) async for store, line in ops.export_user(user)]


async def test_export_hands_over_what_every_store_holds_of_the_user(
    stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    alice, bob = await _made(stack)
    held = await count_rows(stack, "alice", alice)
    with caplog.at_level(logging.INFO, logger="hookmesh.audit"):
        records = await _exported(stack, "alice")
    audited = [r.getMessage() for r in caplog.records if r.name == "hookmesh.audit"]

    stores = [store for store, _ in records]
    order = ["agent.sessions", "agent.replies", "agent.reply_events", "a2a.tasks"]
    order += ["retrieval.documents", "memory.memories"]
    assert sorted(set(stores), key=stores.index) == order
    assert stores == sorted(stores, key=order.index)
    counts = {store: stores.count(store) for store in order}
    assert counts == held
    by_store = {s: [r for t, r in records if t == s] for s in order}
    assert [r["session_id"] for r in by_store["agent.sessions"]] == sorted(alice)
    said = json.dumps(by_store["agent.sessions"])
    assert "remember turn 0" in said and "remember turn 1" in said
    events = by_store["agent.reply_events"]
    assert {e["session_id"] for e in events} == set(alice)
    assert all(e["event"] for e in events)
    keys = [(e["session_id"], e["reply_id"], e["seq"]) for e in events]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    assert {r["status"] for r in by_store["agent.replies"]} == {"ended"}
    assert sorted(t["context_id"] for t in by_store["a2a.tasks"]) == sorted(alice)
    assert by_store["a2a.tasks"][0]["status"]["state"] == "TASK_STATE_COMPLETED"
    documents = by_store["retrieval.documents"]
    assert [(d["knowledge_base"], d["id"]) for d in documents] == [
        ("diary", "a2"),
        ("shared", "a1"),
    ]
    assert documents[1]["text"] == "alice plants tulips"
    assert sorted(m["text"] for m in by_store["memory.memories"]) == [
        "alice drinks green tea",
        "alice owns a cat",
    ]
    everything = json.dumps(records)
    assert "bob" not in everything and not any(sid in everything for sid in bob)
    assert audited == [
        "export user 'alice' by 'ops': " + ", ".join(f"{s}={counts[s]}" for s in order)
    ]


async def test_export_batches_stay_bounded_and_pages_lose_nothing(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _made(stack)
    whole = await _exported(stack, "alice")
    monkeypatch.setattr(exporting, "BATCH_RECORDS", 3)
    monkeypatch.setattr(exporting, "_SESSION_PAGE", 1)
    monkeypatch.setattr(exporting, "_ROW_PAGE", 2)
    monkeypatch.setattr(exporting, "_MEMORY_PAGE", 1)
    monkeypatch.setattr(exporting, "_DOCUMENT_PAGE", 1)
    async with grpc.aio.insecure_channel(stack.target) as channel:
        call = admin_pb2_grpc.AdminServiceStub(channel).ExportUser(
            admin_pb2.ExportUserRequest(user_id="alice"),
            timeout=SHORT_TIMEOUT,
            metadata=(("authorization", "Bearer ops-token"),),
        )
        batches = [list(response.records) async for response in call]
    assert len(batches) >= len(whole) / 3 and all(1 <= len(b) <= 3 for b in batches)
    assert all(len({r.store for r in b}) == 1 for b in batches)
    paged = [(r.store, json.loads(r.json)) for batch in batches for r in batch]
    assert paged == whole


async def test_export_of_an_unknown_user_is_empty_and_bad_input_refused(stack: Stack) -> None:
    await _made(stack)
    assert await _exported(stack, "carol") == []
    async with AdminClient(stack.target, timeout=SHORT_TIMEOUT, token="ops-token") as ops:
        for bad in ("", "a\nb", "x" * 129):
            with pytest.raises(AgentClientError) as refused:
                _ = [r async for r in ops.export_user(bad)]
            assert (refused.value.code, refused.value.reason) == (
                grpc.StatusCode.INVALID_ARGUMENT,
                "INVALID_USER_ID",
            )
            assert [v.field for v in refused.value.violations] == ["user_id"]
    target = stack.retrieval_target
    async with RetrievalClient(target, timeout=SHORT_TIMEOUT, token="carol-token") as kb:
        for field, kwargs in (
            ("page_size", {"page_size": 101}),
            ("page_token", {"page_token": "x"}),
        ):
            with pytest.raises(AgentClientError) as refused:
                await kb.list_user_documents(**kwargs)  # type: ignore[arg-type]
            assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
            assert [v.field for v in refused.value.violations] == [field]
    async with AdminClient(stack.target, timeout=SHORT_TIMEOUT, token="bob-token") as bob:
        with pytest.raises(AgentClientError) as denied:
            _ = [r async for r in bob.export_user("alice")]
    assert (denied.value.code, denied.value.reason) == (
        grpc.StatusCode.PERMISSION_DENIED,
        "ADMIN_ONLY",
    )


async def test_export_after_forget_is_empty(stack: Stack) -> None:
    await _made(stack)
    async with AdminClient(stack.target, timeout=SHORT_TIMEOUT, token="ops-token") as ops:
        await ops.forget_user("alice")
    assert await _exported(stack, "alice") == []
    assert {store for store, _ in await _exported(stack, "bob")} >= {"agent.sessions", "a2a.tasks"}


async def test_the_cli_writes_the_export_as_json_lines(
    stack: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _made(stack)
    whole = await _exported(stack, "alice")
    monkeypatch.setenv("OPS_TOKEN", "ops-token")
    out = tmp_path / "alice.jsonl"
    export = ("admin", "export", "--user", "alice", "-o", str(out), "--target", stack.target)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "hookmesh.cli", *export, "--token-env", "OPS_TOKEN",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(SHORT_TIMEOUT * 3):
        printed, err = await process.communicate()
    assert (process.returncode, err) == (0, b"")
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(line["store"], line["record"]) for line in lines] == whole
    assert out.stat().st_mode & 0o777 == 0o600
    assert not out.with_name("alice.jsonl.partial").exists()
    summary = printed.decode().splitlines()
    assert summary[0] == "agent.sessions: 2 records"
    assert summary[-1] == f"exported {len(whole)} records of 'alice' to {out}"


async def test_the_cli_export_shows_a_bar_per_store_on_a_terminal(
    stack: Stack, tmp_path: Path
) -> None:
    from tests.e2e.commands import ROOT
    from tests.terminal import on_terminal, plain

    await _made(stack)
    whole = await _exported(stack, "alice")
    out = tmp_path / "alice.jsonl"
    export = ("admin", "export", "--user", "alice", "-o", str(out), "--target", stack.target)
    shown = plain(
        await on_terminal(
            sys.executable, "-m", "hookmesh.cli", *export, "--token-env", "OPS_TOKEN",
            columns=120, env={**os.environ, "OPS_TOKEN": "ops-token"}, cwd=ROOT,
        )
    )  # fmt: skip
    totals = [int(n) for n in re.findall(r"all stores\s.*?(\d+) records", shown)]
    assert totals and totals == sorted(totals) and totals[-1] == len(whole), shown
    for store in {s for s, _ in whole}:
        counted = [int(n) for n in re.findall(rf"{re.escape(store)}\s.*?(\d+) records", shown)]
        assert counted[-1] == sum(1 for s, _ in whole if s == store), (store, shown)
    assert f"exported {len(whole)} records of 'alice' to {out}" in shown
    assert len(out.read_text().splitlines()) == len(whole)


@pytest.fixture
async def files_agent(
    session_backend: SessionBackend, tmp_path: Path
) -> AsyncIterator[tuple[Stack, Path, Path]]:
    """An agent whose middlewares keep files per user: file memory and offloaded output."""
    (tmp_path / "tokens").write_text(TOKENS)
    memory_root, offload_root = tmp_path / "memory", tmp_path / "offload"
    builtin = "hookmesh.middleware.builtin"
    config = session_backend.config(
        auth={"token_file": str(tmp_path / "tokens")},
        admin_principals=["ops"],
        models={"default": FILE_MODEL},
        tools=["tests.service_tools:long_report"],
        middlewares=[
            {
                "type": "local",
                "import": f"{builtin}:FileMemoryMiddleware",
                "params": {"root": str(memory_root), "per_user": True},
            },
            {
                "type": "local",
                "import": f"{builtin}:ReductionMiddleware",
                "params": {"root_dir": str(offload_root), "max_length": 100, "preview_chars": 20},
            },
        ],
    )
    agent = await start_agent_service(load_config(None, **config), address="127.0.0.1:0")
    try:
        stack = Stack(agent, session_backend, "", tmp_path / "unused", "")
        yield stack, memory_root, offload_root
    finally:
        await agent.stop(None)


async def test_forget_and_export_reach_the_middlewares_files_of_the_user(
    files_agent: tuple[Stack, Path, Path],
) -> None:
    from hookmesh.middleware import user_folder

    stack, memory_root, offload_root = files_agent
    await _converse(stack, "alice-token", 1)
    await _converse(stack, "bob-token", 1)
    alice, bob = user_folder("alice"), user_folder("bob")
    assert files_in(memory_root / alice) == ["MEMORY.md", "diet.md"]
    assert files_in(memory_root / bob) == ["MEMORY.md", "diet.md"]
    [report] = files_in(offload_root / alice)
    assert len(files_in(offload_root / bob)) == 1

    exported = await _exported(stack, "alice")
    memory_files = [r for s, r in exported if s == "file_memory.files"]
    assert [r["file"] for r in memory_files] == ["MEMORY.md", "diet.md"]
    assert "vegetarian" in memory_files[1]["text"]
    [offloaded] = [r for s, r in exported if s == "offload.files"]
    assert offloaded["text"] == "report line\n" * 40
    assert offloaded["location"].endswith(report) and alice in offloaded["location"]
    assert bob not in json.dumps(exported)

    async with AdminClient(stack.target, timeout=SHORT_TIMEOUT, token="ops-token") as ops:
        receipt = dict(await ops.forget_user("alice"))
        again = dict(await ops.forget_user("alice"))
    assert (receipt["file_memory.files"], receipt["offload.files"]) == (2, 1)
    assert (again["file_memory.files"], again["offload.files"]) == (0, 0)
    assert not (memory_root / alice).exists() and not (offload_root / alice).exists()
    assert files_in(memory_root / bob) == ["MEMORY.md", "diet.md"]
    assert len(files_in(offload_root / bob)) == 1
    assert await _exported(stack, "alice") == []


async def test_a_refused_cli_export_leaves_no_file(
    stack: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPS_TOKEN", "ops-token")
    out = tmp_path / "bad.jsonl"
    export = ("admin", "export", "--user", "a\tb", "-o", str(out), "--target", stack.target)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "hookmesh.cli", *export, "--token-env", "OPS_TOKEN",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(SHORT_TIMEOUT * 3):
        printed, err = await process.communicate()
    assert process.returncode == 2 and b"user_id" in err and printed == b""
    assert not out.exists() and not out.with_name("bad.jsonl.partial").exists()


async def test_an_unreachable_store_ends_the_export_unavailable_after_what_was_read(
    session_backend: SessionBackend, tmp_path: Path
) -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    (tmp_path / "tokens").write_text(TOKENS)
    config = session_backend.config(
        auth={"token_file": str(tmp_path / "tokens")},
        admin_principals=["ops"],
        erasure={"memory": f"127.0.0.1:{closed}"},
    )
    agent = await start_agent_service(load_config(None, **config), address="127.0.0.1:0")
    try:
        stack = Stack(agent, session_backend, "", tmp_path / "unused", "")
        await _converse(stack, "alice-token", 1)
        received: list[str] = []
        async with AdminClient(stack.target, timeout=SHORT_TIMEOUT, token="ops-token") as ops:
            with pytest.raises(AgentClientError) as failed:
                async for store, _ in ops.export_user("alice"):
                    received.append(store)
            with pytest.raises(AgentClientError) as unerased:
                await ops.forget_user("alice")
    finally:
        await agent.stop(None)
    assert (failed.value.code, failed.value.reason) == (
        grpc.StatusCode.UNAVAILABLE,
        "EXPORT_STORE_UNAVAILABLE",
    )
    assert "memory.memories" in failed.value.message
    assert received[0] == "agent.sessions" and "memory.memories" not in received
    assert unerased.value.reason == "ERASURE_STORE_UNAVAILABLE"


async def test_a_folder_planted_outside_the_offload_root_is_refused_not_internal(
    files_agent: tuple[Stack, Path, Path], tmp_path: Path
) -> None:
    from hookmesh.middleware import user_folder

    stack, _, offload_root = files_agent
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "keep.txt").write_text("not the store's")
    offload_root.mkdir(exist_ok=True)
    (offload_root / user_folder("mallory")).symlink_to(outside, target_is_directory=True)
    async with AdminClient(stack.target, timeout=SHORT_TIMEOUT, token="ops-token") as ops:
        with pytest.raises(AgentClientError) as unerased:
            await ops.forget_user("mallory")
        with pytest.raises(AgentClientError) as unexported:
            async for _ in ops.export_user("mallory"):
                pass
        assert await ops.forget_user("bob")  # the server still serves
    assert (unerased.value.code, unerased.value.reason) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "ERASURE_STORE_REFUSED",
    )
    assert (unexported.value.code, unexported.value.reason) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "EXPORT_STORE_REFUSED",
    )
    assert "offload.files" in unerased.value.message
    assert (outside / "keep.txt").read_text() == "not the store's"


async def test_a_service_refusing_the_agent_is_a_precondition_not_a_call_again(
    session_backend: SessionBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "tokens").write_text(TOKENS)
    (tmp_path / "memory-tokens").write_text("ops:ops-token\n")  # the agent's token is unknown
    memory = await start_memory_service(
        load_memory_config(
            None,
            store=f"sqlite:///{tmp_path}/memory.db",
            auth={"token_file": str(tmp_path / "memory-tokens")},
        ),
        address="127.0.0.1:0",
    )
    monkeypatch.setenv("TEST_MEMORY_TOKEN", "agent-token")
    config = session_backend.config(
        auth={"token_file": str(tmp_path / "tokens")},
        admin_principals=["ops"],
        erasure={"memory": f"127.0.0.1:{memory.port}", "memory_token_env": "TEST_MEMORY_TOKEN"},
    )
    agent = await start_agent_service(load_config(None, **config), address="127.0.0.1:0")
    try:
        target = f"127.0.0.1:{agent.port}"
        async with AdminClient(target, timeout=SHORT_TIMEOUT, token="ops-token") as ops:
            with pytest.raises(AgentClientError) as unerased:
                await ops.forget_user("alice")
            with pytest.raises(AgentClientError) as unexported:
                async for _ in ops.export_user("alice"):
                    pass
    finally:
        await agent.stop(None)
        await memory.stop(None)
    assert (unerased.value.code, unerased.value.reason) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "ERASURE_STORE_REFUSED",
    )
    assert "memory.memories" in unerased.value.message
    assert "UNAUTHENTICATED" in unerased.value.message
    assert "agent-token" not in unerased.value.message
    assert (unexported.value.code, unexported.value.reason) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "EXPORT_STORE_REFUSED",
    )
