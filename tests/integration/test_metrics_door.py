"""A service's Prometheus endpoint (every gRPC service's and every gateway's) is an HTTP door
like the gateways: a foreign Host (DNS rebinding) or a foreign Origin (a page in the user's
browser) is refused, and with `metrics_token_env` a scrape must send exactly one right bearer
token. Real HTTP requests, written byte by byte so every header is the test's."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from hookmesh.server import RunningServer, start_server
from hookmesh.services.a2a import load_a2a_config, start_a2a_server
from hookmesh.services.agui import load_agui_config, start_agui_gateway
from hookmesh.services.mcp import load_mcp_settings, start_mcp_http_server
from tests.agent_helpers import SHORT_TIMEOUT

pytestmark = pytest.mark.timeout(60)

TOKEN = "scrape-secret-1"
OTHER = "scrape-secret-2"


@asynccontextmanager
async def _server(**metrics: Any) -> AsyncIterator[RunningServer]:
    running = await start_server([], "127.0.0.1:0", metrics_listen="127.0.0.1:0", **metrics)
    try:
        yield running
    finally:
        await running.stop(None)


async def _request(
    port: int, headers: list[tuple[str, str]], *, method: str = "GET", path: str = "/metrics"
) -> tuple[int, bytes]:
    """One HTTP/1.1 request with exactly `headers`; the status and the body."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        lines = [f"{method} {path} HTTP/1.1", *(f"{k}: {v}" for k, v in headers)]
        writer.write(("\r\n".join([*lines, "Connection: close", "", ""])).encode())
        await writer.drain()
        async with asyncio.timeout(SHORT_TIMEOUT):
            answer = await reader.read()
    finally:
        writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def _reason(body: bytes) -> str:
    return str(json.loads(body)["error"]["reason"])


def _host(port: int) -> Callable[[str], tuple[str, str]]:
    return lambda name: ("Host", f"{name}:{port}")


async def test_a_loopback_scrape_reads_the_metrics_and_foreign_hosts_and_origins_are_refused(
    metric_reader: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with _server() as running:
        assert running.metrics is not None
        port = running.metrics.port
        assert f"metrics endpoint on http://127.0.0.1:{port}/metrics" in caplog.text
        host = _host(port)
        for name in ("127.0.0.1", "localhost", "[::1]"):
            status, body = await _request(port, [host(name)])
            assert status == 200, body
            assert b"# TYPE " in body
        # DNS rebinding: a foreign name resolving to 127.0.0.1 still sends its own Host.
        status, body = await _request(port, [host("attacker.example")])
        assert (status, _reason(body)) == (421, "HOST_NOT_ALLOWED")
        status, body = await _request(port, [])
        assert status == 400  # HTTP/1.1 without a Host
        # A page in the user's browser fetching the counters cross-origin.
        status, body = await _request(
            port, [host("127.0.0.1"), ("Origin", "https://attacker.example")]
        )
        assert (status, _reason(body)) == (403, "ORIGIN_NOT_ALLOWED")
        for path in ("/", "/metrics/more", "/zz"):
            status, body = await _request(port, [host("127.0.0.1")], path=path)
            assert (status, _reason(body)) == (404, "NOT_FOUND")
        status, body = await _request(port, [host("127.0.0.1")], method="HEAD")
        assert (status, body) == (200, b"")
        status, body = await _request(port, [host("127.0.0.1")], method="DELETE")
        assert (status, _reason(body)) == (405, "METHOD_NOT_ALLOWED")
        # A refusal keeps the connection: the same client's next scrape is served on it.
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            for path, status in (("/", 404), ("/metrics", 200)):
                writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
                async with asyncio.timeout(SHORT_TIMEOUT):
                    head = await reader.readuntil(b"\r\n\r\n")
                    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                    await reader.readexactly(length)
                assert int(head.split(b" ", 2)[1]) == status
        finally:
            writer.close()
    # Stopping is quiet: nothing cut, nothing logged as an error.
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []


async def test_configured_hosts_are_accepted(metric_reader: Any) -> None:
    async with _server(metrics_allowed_hosts=["metrics.internal"]) as running:
        assert running.metrics is not None
        port = running.metrics.port
        status, body = await _request(port, [_host(port)("metrics.internal")])
        assert status == 200 and b"# TYPE " in body
        status, body = await _request(port, [_host(port)("other.internal")])
        assert (status, _reason(body)) == (421, "HOST_NOT_ALLOWED")


async def test_with_a_token_a_scrape_sends_exactly_one_right_bearer_token(
    metric_reader: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCRAPE_TOKENS", f"prometheus:{TOKEN},{OTHER}")
    async with _server(metrics_token_env="SCRAPE_TOKENS") as running:
        assert running.metrics is not None
        port = running.metrics.port
        host = _host(port)("127.0.0.1")
        for token in (TOKEN, OTHER):
            # Headers besides the token (sorting before it, too) are not taken for it.
            headers = [("Accept", "text/plain"), host, ("Authorization", f"Bearer {token}")]
            status, body = await _request(port, headers)
            assert status == 200 and b"# TYPE " in body
        cases = [
            ([], "CREDENTIALS_REQUIRED"),
            ([("Accept", f"Bearer {TOKEN}")], "CREDENTIALS_REQUIRED"),
            ([("Authorization", "Bearer wrong")], "INVALID_TOKEN"),
            ([("Authorization", TOKEN)], "INVALID_TOKEN"),
            (
                [("Authorization", "Bearer wrong"), ("Authorization", f"Bearer {TOKEN}")],
                "MULTIPLE_CREDENTIALS",
            ),
        ]
        for headers, reason in cases:
            status, body = await _request(port, [host, *headers])
            assert (status, _reason(body)) == (401, reason)
            assert TOKEN.encode() not in body
        # The Host check runs before the token one: a right token does not help a rebinding.
        status, body = await _request(
            port, [_host(port)("attacker.example"), ("Authorization", f"Bearer {TOKEN}")]
        )
        assert (status, _reason(body)) == (421, "HOST_NOT_ALLOWED")


async def test_an_unset_token_variable_fails_the_start(metric_reader: Any) -> None:
    with pytest.raises(ValueError, match="metrics_token_env NO_SUCH_SCRAPE_TOKENS is not set"):
        await start_server(
            [],
            "127.0.0.1:0",
            metrics_listen="127.0.0.1:0",
            metrics_token_env="NO_SUCH_SCRAPE_TOKENS",
        )


async def _gateway(name: str, tmp_path: Path, **settings: Any) -> Any:
    agent = "127.0.0.1:1"  # never called: the agent channel connects on first use
    if name == "agui":
        return await start_agui_gateway(
            load_agui_config(None, agent=agent, **settings), address="127.0.0.1:0"
        )
    if name == "a2a":
        config = load_a2a_config(
            None, agent=agent, store=f"sqlite:///{tmp_path}/a2a.db", **settings
        )
        return await start_a2a_server(config, address="127.0.0.1:0")
    mcp = load_mcp_settings(
        None, transport="http", retrieval=None, memory=None, tts=None, **settings
    )
    return await start_mcp_http_server(mcp, address="127.0.0.1:0")


@pytest.mark.parametrize("name", ["agui", "a2a", "mcp"])
async def test_every_gateway_serves_metrics_behind_the_same_door(
    name: str, tmp_path: Path, metric_reader: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCRAPE_TOKENS", TOKEN)
    gateway = await _gateway(
        name, tmp_path, metrics_listen="127.0.0.1:0", metrics_token_env="SCRAPE_TOKENS"
    )
    try:
        assert gateway.metrics is not None and gateway.metrics.port != gateway.port
        port = gateway.metrics.port
        bearer = ("Authorization", f"Bearer {TOKEN}")
        status, body = await _request(port, [_host(port)("localhost"), bearer])
        assert status == 200 and b"# TYPE " in body
        status, body = await _request(port, [_host(port)("localhost")])
        assert (status, _reason(body)) == (401, "CREDENTIALS_REQUIRED")
        status, body = await _request(port, [_host(port)("attacker.example"), bearer])
        assert (status, _reason(body)) == (421, "HOST_NOT_ALLOWED")
    finally:
        await gateway.stop(0.5)
    with pytest.raises(OSError):
        await _request(port, [_host(port)("localhost"), bearer])
