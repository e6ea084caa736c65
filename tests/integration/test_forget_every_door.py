"""Forgetting a user whose data came in through every front door: a reply over gRPC
(`AgentClient`), one from `hookmesh chat`, an AG-UI run, an A2A message, a memory over MCP and
one over gRPC, a document over gRPC; each reply also writes a file memory and offloads a long
tool result. On SQLite one agent serves; on PostgreSQL two replicas share one schema, the doors
reach replica B and the operator asks replica A.

After `forget`, the databases and folders themselves (not the API) hold nothing of the user,
another user's data is as it was, the receipt counts exactly what was made, a second `forget`
counts nothing, and the export before it handed over what was made."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from hookmesh.client import AdminClient, AgentClient, MemoryClient
from hookmesh.memory import MemoryScope
from hookmesh.middleware import user_folder
from hookmesh.schema import ReplyStartEvent
from hookmesh.services.a2a import load_a2a_config, start_a2a_server
from hookmesh.services.a2a._tasks import open_task_store
from hookmesh.services.agent import AgentService, load_config, start_agent_service
from hookmesh.services.agui import load_agui_config, start_agui_gateway
from hookmesh.services.mcp import load_mcp_settings, start_mcp_http_server
from hookmesh.services.memory import load_memory_config, start_memory_service
from hookmesh.services.retrieval import load_retrieval_config, start_retrieval_service
from tests.agent_helpers import SHORT_TIMEOUT
from tests.agui_stack import sse_events
from tests.e2e.commands import run
from tests.forget_stack import FILE_MODEL, TOKENS, Stack, count_rows, files_in, ingest
from tests.gateways import WAIT, valid_body
from tests.session_backends import SessionBackend

pytestmark = pytest.mark.timeout(240)


@dataclass
class Doors:
    """Where each front door listens, the agent replicas behind them and where the
    middlewares keep their files."""

    stack: Stack
    """Replica A (the operator's) and the stores."""
    writer: AgentService
    """Replica B, behind every door (replica A itself on SQLite)."""
    agui: str
    a2a: str
    mcp: str
    memory_root: Path
    offload_root: Path

    @property
    def writer_target(self) -> str:
        return f"127.0.0.1:{self.writer.port}"


@pytest.fixture
async def doors(
    session_backend: SessionBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Doors]:
    (tmp_path / "tokens").write_text(TOKENS)
    auth = {"token_file": str(tmp_path / "tokens")}
    trusting = {**auth, "trusted_gateways": ["agent"]}
    memory_db = tmp_path / "memory.db"
    memory = await start_memory_service(
        load_memory_config(None, store=f"sqlite:///{memory_db}", auth=trusting, grace_seconds=0.5),
        address="127.0.0.1:0",
    )
    sqlite = session_backend.name == "sqlite"
    kb_url = f"sqlite:///{tmp_path}/kb.db" if sqlite else session_backend.url
    kb_namespace = f"{session_backend.namespace}_kb"
    retrieval = await start_retrieval_service(
        load_retrieval_config(
            None, store=kb_url, namespace=kb_namespace, auth=trusting, grace_seconds=0.5
        ),
        address="127.0.0.1:0",
    )
    a2a_url = f"sqlite:///{tmp_path}/a2a.db" if sqlite else session_backend.url
    await (await open_task_store(a2a_url, max_tasks=1000)).close()
    memory_root, offload_root = tmp_path / "memory", tmp_path / "offload"
    builtin = "hookmesh.middleware.builtin"
    config = session_backend.config(
        auth=auth,
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
        erasure={
            "a2a_task_store": a2a_url,
            "memory": f"127.0.0.1:{memory.port}",
            "memory_token_env": "TEST_MEMORY_TOKEN",
            "retrieval": f"127.0.0.1:{retrieval.port}",
            "retrieval_token_env": "TEST_MEMORY_TOKEN",
        },
    )
    started: list[Any] = []
    monkeypatch.setenv("TEST_MEMORY_TOKEN", "agent-token")
    replicas = [
        await start_agent_service(load_config(None, **config), address="127.0.0.1:0")
        for _ in range(1 if sqlite else 2)
    ]
    try:
        writer = f"127.0.0.1:{replicas[-1].port}"
        agui = await start_agui_gateway(load_agui_config(None, agent=writer), address="127.0.0.1:0")
        started.append(agui)
        a2a = await start_a2a_server(
            load_a2a_config(None, agent=writer, store=a2a_url), address="127.0.0.1:0"
        )
        started.append(a2a)
        mcp_settings = load_mcp_settings(
            None,
            transport="http",
            memory=f"127.0.0.1:{memory.port}",
            retrieval=None,
            tts=None,
            auth=auth,
        )
        mcp = await start_mcp_http_server(mcp_settings, address="127.0.0.1:0")
        started.append(mcp)
        stack = Stack(
            replicas[0],
            session_backend,
            a2a_url,
            memory_db,
            f"127.0.0.1:{memory.port}",
            f"127.0.0.1:{retrieval.port}",
            kb_url,
            kb_namespace,
        )
        yield Doors(
            stack,
            replicas[-1],
            f"http://127.0.0.1:{agui.port}",
            f"http://127.0.0.1:{a2a.port}",
            f"http://127.0.0.1:{mcp.port}/mcp",
            memory_root,
            offload_root,
        )
    finally:
        for server in reversed(started):
            await server.stop(0.5)
        for replica in replicas:
            await replica.stop(None)
        await memory.stop(None)
        await retrieval.stop(None)


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def _over_grpc(doors: Doors, token: str) -> str:
    async with AgentClient(doors.writer_target, timeout=SHORT_TIMEOUT, token=token) as client:
        events = [e async for e in client.reply("remember this over gRPC")]
    assert isinstance(events[0], ReplyStartEvent)
    return events[0].session_id


async def _over_cli(doors: Doors, token: str) -> str:
    code, out, err = await run(
        "chat", "--target", doors.writer_target, "--token-env", "DOOR_TOKEN", "--json",
        "remember this from the CLI",
        env={"DOOR_TOKEN": token},
    )  # fmt: skip
    assert code == 0, err
    [start] = [e for e in map(json.loads, out.splitlines()) if e["type"] == "reply_start"]
    return str(start["session_id"])


async def _over_agui(doors: Doors, token: str) -> str:
    body = valid_body("agui")
    async with httpx.AsyncClient(base_url=doors.agui, timeout=WAIT) as http:
        answer = await http.post("/agui", json=body, headers=_bearer(token))
    assert answer.status_code == 200, answer.text
    events = sse_events(answer.text)
    assert events[-1]["type"] == "RUN_FINISHED", events[-1]
    return str(body["threadId"])  # the thread is the agent session


async def _over_a2a(doors: Doors, token: str) -> str:
    async with httpx.AsyncClient(base_url=doors.a2a, timeout=WAIT) as http:
        answer = await http.post("/", json=valid_body("a2a"), headers=_bearer(token))
    result = answer.json()["result"]
    assert result["status"]["state"] == "completed", result
    return str(result["contextId"])


async def _over_mcp(doors: Doors, token: str, fact: str) -> None:
    async with (
        httpx2.AsyncClient(headers=_bearer(token), timeout=WAIT) as http,
        Client(streamable_http_client(doors.mcp, http_client=http), cache=None) as mcp,
    ):
        said = await mcp.call_tool("remember", {"fact": fact})
    assert not said.is_error, said


async def _held(doors: Doors, user: str, sessions: list[str]) -> dict[str, int]:
    """What the databases and folders hold of `user`, per store (named as in the receipt)."""
    counts = await count_rows(doors.stack, user, sessions)
    counts["file_memory.files"] = len(files_in(doors.memory_root / user_folder(user)))
    counts["offload.files"] = len(files_in(doors.offload_root / user_folder(user)))
    return counts


async def test_forget_reaches_what_every_front_door_made(doors: Doors) -> None:
    alice = [
        await _over_grpc(doors, "alice-token"),
        await _over_cli(doors, "alice-token"),
        await _over_agui(doors, "alice-token"),
        await _over_a2a(doors, "alice-token"),
    ]
    await _over_mcp(doors, "alice-token", "alice keeps bees on the roof")
    async with MemoryClient(
        doors.stack.memory_target, timeout=SHORT_TIMEOUT, token="alice-token"
    ) as memory:
        await memory.add(MemoryScope(user_id="alice"), facts=["alice sails on sundays"])
    await ingest(doors.stack, "alice-token", "shared", {"a1": "alice plants tulips"})
    bob = [await _over_grpc(doors, "bob-token"), await _over_a2a(doors, "bob-token")]
    await _over_mcp(doors, "bob-token", "bob repairs old radios")
    await ingest(doors.stack, "bob-token", "shared", {"b1": "bob plants tulips"})

    made = await _held(doors, "alice", alice)
    bob_before = await _held(doors, "bob", bob)
    assert len(set(alice)) == 4
    assert (made["agent.sessions"], made["a2a.tasks"], made["memory.memories"]) == (4, 1, 2)
    assert (made["retrieval.documents"], made["file_memory.files"], made["offload.files"]) == (
        1,
        2,
        4,
    )
    assert made["agent.replies"] == 4 and made["agent.reply_events"] > 0

    async with AdminClient(doors.stack.target, timeout=SHORT_TIMEOUT, token="ops-token") as ops:
        exported = [(store, json.loads(line)) async for store, line in ops.export_user("alice")]
        receipt = dict(await ops.forget_user("alice"))
        again = dict(await ops.forget_user("alice"))
        after = [store async for store, _ in ops.export_user("alice")]

    assert receipt == made
    assert await _held(doors, "alice", alice) == dict.fromkeys(made, 0)
    assert again == dict.fromkeys(made, 0)
    assert after == []
    assert await _held(doors, "bob", bob) == bob_before

    stores = [store for store, _ in exported]
    assert {store: stores.count(store) for store in made} == made
    by_store = {s: [r for t, r in exported if t == s] for s in made}
    assert sorted(r["session_id"] for r in by_store["agent.sessions"]) == sorted(alice)
    said = json.dumps(by_store["agent.sessions"])
    assert "remember this over gRPC" in said and "remember this from the CLI" in said
    assert [t["context_id"] for t in by_store["a2a.tasks"]] == [alice[3]]
    assert sorted(m["text"] for m in by_store["memory.memories"]) == [
        "alice keeps bees on the roof",
        "alice sails on sundays",
    ]
    assert [d["text"] for d in by_store["retrieval.documents"]] == ["alice plants tulips"]
    assert [f["file"] for f in by_store["file_memory.files"]] == ["MEMORY.md", "diet.md"]
    assert all(o["text"] == "report line\n" * 40 for o in by_store["offload.files"])
    everything = json.dumps(exported)
    assert "bob" not in everything and not any(session in everything for session in bob)
