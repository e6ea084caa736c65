"""`hookmesh serve mcp --transport http` as its own process, until SIGTERM."""

from __future__ import annotations

import asyncio
import signal
import sys

import pytest
from mcp import Client

from tests.e2e.commands import DEADLINE, ROOT, run

pytestmark = pytest.mark.timeout(90)


async def test_serve_mcp_over_http_until_sigterm() -> None:
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "hookmesh.cli", "serve", "mcp", "--transport", "http",
        "--listen", "127.0.0.1:0", stdout=asyncio.subprocess.PIPE, cwd=ROOT,
    )  # fmt: skip
    assert server.stdout is not None
    try:
        async with asyncio.timeout(DEADLINE):
            line = (await server.stdout.readline()).decode().strip()
        assert line.startswith("mcp server listening on 127.0.0.1:"), line
        async with (
            asyncio.timeout(DEADLINE),
            Client(f"http://{line.rsplit(' ', 1)[1]}/mcp", cache=None) as client,
        ):
            names = {t.name for t in (await client.list_tools()).tools}
        assert names == {"search_knowledge", "recall", "remember", "speak"}
    finally:
        if server.returncode is None:
            server.send_signal(signal.SIGTERM)
        async with asyncio.timeout(DEADLINE):
            assert await server.wait() == 0


async def test_a_bad_transport_is_a_usage_error() -> None:
    code, _, err = await run("serve", "mcp", "--transport", "carrier-pigeon")
    assert code == 2
    assert err.strip() == "error: --transport 'carrier-pigeon' is not stdio or http"
