"""`hookmesh serve mcp --transport http` as its own process, until SIGTERM."""

from __future__ import annotations

import asyncio

import pytest
from mcp import Client

from hookmesh.testing import hookmesh_process
from tests.e2e.commands import DEADLINE, run

pytestmark = pytest.mark.timeout(90)


async def test_serve_mcp_over_http_until_sigterm() -> None:
    async with hookmesh_process(
        "serve", "mcp", "--transport", "http", "--listen", "127.0.0.1:0",
        ready="mcp server listening on ",
    ) as server:  # fmt: skip
        async with (
            asyncio.timeout(DEADLINE),
            Client(f"http://{server.address}/mcp", cache=None) as client,
        ):
            names = {t.name for t in (await client.list_tools()).tools}
        assert names == {"search_knowledge", "recall", "remember", "speak"}
    assert server.process.returncode == 0  # a clean stop at SIGTERM


async def test_a_bad_transport_is_a_usage_error() -> None:
    code, _, err = await run("serve", "mcp", "--transport", "carrier-pigeon")
    assert code == 2
    assert err.strip() == "error: --transport 'carrier-pigeon' is not stdio or http"
