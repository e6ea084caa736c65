"""`hookmesh serve mcp` with real retrieval, memory and TTS services, through the official MCP
client: over streamable HTTP (callers authenticated, each acting as its own principal) and over
stdio (the `hookmesh serve mcp` command started by the client)."""

from __future__ import annotations

import base64
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from hookmesh.client import RetrievalClient
from hookmesh.retrieval import Document
from hookmesh.services.mcp import load_mcp_settings, start_mcp_http_server
from hookmesh.services.memory import load_memory_config, start_memory_service
from hookmesh.services.retrieval import load_retrieval_config, start_retrieval_service
from hookmesh.services.tts import load_tts_config, start_tts_service
from tests.e2e.commands import ROOT

pytestmark = pytest.mark.timeout(120)


@dataclass
class Suite:
    retrieval: str
    memory: str
    tts: str
    tokens: Path


@pytest.fixture
async def suite(tmp_path: Path) -> AsyncIterator[Suite]:
    """Retrieval (a knowledge base `birds` and one `cooking`), memory and TTS services, all
    checking the tokens of alice and bob."""
    tokens = tmp_path / "tokens"
    tokens.write_text("alice:alice-token\nbob:bob-token\n")
    auth = {"token_file": str(tokens)}
    retrieval = await start_retrieval_service(
        load_retrieval_config(None, store=f"sqlite:///{tmp_path}/r.db", auth=auth),
        address="127.0.0.1:0",
    )
    memory = await start_memory_service(
        load_memory_config(None, store=f"sqlite:///{tmp_path}/m.db", auth=auth),
        address="127.0.0.1:0",
    )
    tts = await start_tts_service(load_tts_config(auth=auth), address="127.0.0.1:0")
    try:
        async with RetrievalClient(f"127.0.0.1:{retrieval.port}", token="alice-token") as kb:
            await kb.create_knowledge_base("birds")
            await kb.create_knowledge_base("cooking")
            await kb.ingest(
                "birds", [Document("herons", "Grey herons spear fish with their bill.")]
            )
            await kb.ingest(
                "cooking", [Document("bread", "Sourdough rises slowly with wild yeast.")]
            )
        yield Suite(
            f"127.0.0.1:{retrieval.port}",
            f"127.0.0.1:{memory.port}",
            f"127.0.0.1:{tts.port}",
            tokens,
        )
    finally:
        for service in (retrieval, memory, tts):
            await service.stop(None)


def text(result: Any) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


@pytest.fixture
async def http_url(suite: Suite) -> AsyncIterator[str]:
    settings = load_mcp_settings(
        None,
        transport="http",
        retrieval=suite.retrieval,
        memory=suite.memory,
        tts=suite.tts,
        knowledge_bases=["birds"],
        auth={"token_file": str(suite.tokens)},
    )
    server = await start_mcp_http_server(settings, address="127.0.0.1:0")
    try:
        yield f"http://127.0.0.1:{server.port}/mcp"
    finally:
        await server.stop(0.5)


def connect(url: str, token: str | None) -> Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(headers=headers)
    return Client(streamable_http_client(url, http_client=http), cache=None)


async def test_over_http_each_caller_is_its_own_principal(http_url: str) -> None:
    async with connect(http_url, "alice-token") as alice:
        tools = {t.name: t for t in (await alice.list_tools()).tools}
        assert set(tools) == {"search_knowledge", "recall", "remember", "speak"}
        assert tools["recall"].annotations.read_only_hint
        assert tools["remember"].annotations.destructive_hint is False
        said = await alice.call_tool("remember", {"fact": "The user prefers green tea."})
        assert not said.is_error and "Remembered (created)" in text(said)
        found = await alice.call_tool("recall", {"query": "what does the user drink"})
        assert "green tea" in text(found)
    async with connect(http_url, "bob-token") as bob:
        found = await bob.call_tool("recall", {"query": "what does the user drink"})
        assert text(found) == "Nothing remembered matches."


async def test_over_http_a_caller_needs_a_token(http_url: str) -> None:
    async with httpx2.AsyncClient() as http:
        anonymous = await http.post(http_url, json={})
        wrong = await http.post(http_url, json={}, headers={"Authorization": "Bearer nope"})
    assert anonymous.status_code == wrong.status_code == 401
    assert anonymous.headers["www-authenticate"].startswith("Bearer")
    with pytest.raises(ExceptionGroup):  # the SDK reports the 401 from its task groups
        async with connect(http_url, "nope") as stranger:
            await stranger.list_tools()


async def test_search_covers_only_the_offered_knowledge_bases(http_url: str) -> None:
    async with connect(http_url, "alice-token") as alice:
        hits = await alice.call_tool("search_knowledge", {"query": "how do herons fish"})
        assert "birds/herons" in text(hits) and "spear fish" in text(hits)
        refused = await alice.call_tool(
            "search_knowledge", {"query": "bread", "knowledge_bases": ["cooking"]}
        )
        assert refused.is_error and "not offered here: cooking" in text(refused)


async def test_speech_is_an_audio_resource(http_url: str) -> None:
    async with connect(http_url, "alice-token") as alice:
        spoken = await alice.call_tool("speak", {"text": "Hello from hookmesh"})
        (resource,) = spoken.content
        assert resource.type == "resource" and resource.resource.mime_type == "audio/wav"
        wav = base64.b64decode(resource.resource.blob)
        assert wav[:4] == b"RIFF" and wav[8:12] == b"WAVE"
        assert int.from_bytes(wav[40:44], "little") == len(wav) - 44 > 1000
        read = await alice.read_resource("speech://say/hello")
        (contents,) = read.contents
        assert contents.mime_type == "audio/wav"
        assert base64.b64decode(contents.blob)[:4] == b"RIFF"


async def test_over_stdio_the_command_serves_the_local_user(
    suite: Suite, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_TEST_TOKEN", "bob-token")
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m", "hookmesh.cli", "serve", "mcp", "--memory", suite.memory,
            "--retrieval", suite.retrieval, "--tts", suite.tts, "--user", "bob",
            "--token-env", "MCP_TEST_TOKEN",
        ],
        env={"MCP_TEST_TOKEN": "bob-token"},
        cwd=str(ROOT),
    )  # fmt: skip
    async with Client(params, cache=None) as client:
        said = await client.call_tool("remember", {"fact": "Bob keeps bees."})
        assert not said.is_error, text(said)
        found = await client.call_tool("recall", {"query": "bees"})
        assert "Bob keeps bees." in text(found)
        hits = await client.call_tool(
            "search_knowledge", {"query": "sourdough", "knowledge_bases": ["cooking"]}
        )
        assert "cooking/bread" in text(hits)
