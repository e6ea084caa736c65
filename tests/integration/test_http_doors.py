"""Every HTTP gateway (AG-UI with its chat page, A2A, MCP) against the attacks of issue 32,
each as a real client would send it: a page in the user's browser posting cross-origin or
through DNS rebinding, bodies and headers too large, JSON too deep or not Unicode, slow
clients holding connections, one connection too many. Each refusal is a JSON error with a
stable reason; valid requests keep being served."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.gateways import (
    NAMES,
    ROUTES,
    WAIT,
    Gateways,
    RawAnswer,
    exchange,
    gateways,
    headers_for,
    parse,
    post,
    valid_body,
)

pytestmark = pytest.mark.timeout(120)

EVIL = "http://evil.example"


@pytest.fixture
async def doors(tmp_path: Path) -> AsyncIterator[Gateways]:
    async with gateways(tmp_path) as running:
        yield running


def _json(name: str) -> bytes:
    return json.dumps(valid_body(name)).encode()


def _refused(answer: RawAnswer, status: int, reason: str) -> None:
    assert answer.status == status, answer.body
    assert answer.headers["content-type"] == "application/json"
    error = answer.error()
    assert (error["code"], error["reason"]) == (status, reason)
    assert error["message"]


# --- who may call ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("content_type", ["text/plain", "application/json"])
async def test_a_cross_origin_post_is_refused(
    doors: Gateways, name: str, content_type: str
) -> None:
    """A page on another origin posting to a local gateway: a "simple" text/plain request
    needs no preflight, so the gateway itself must refuse it, before the agent runs."""
    request = post(
        ROUTES[name],
        _json(name),
        content_type=content_type,
        origin=EVIL,
        **headers_for(name),
    )
    _refused(await exchange(doors.ports[name], request), 403, "ORIGIN_NOT_ALLOWED")
    assert await doors.served(name)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None],
)
async def test_a_post_that_is_not_json_is_refused(
    doors: Gateways, name: str, content_type: str | None
) -> None:
    """The three content types a form (or a cross-origin fetch without preflight) may send,
    and none: refused even from the gateway's own origin."""
    headers = {"content_type": content_type} if content_type else {}
    port = doors.ports[name]
    own = f"http://127.0.0.1:{port}"
    request = post(
        ROUTES[name], _json(name), host=f"127.0.0.1:{port}", origin=own, **headers,
        **headers_for(name),
    )  # fmt: skip
    _refused(await exchange(port, request), 415, "UNSUPPORTED_MEDIA_TYPE")


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("path", ["route", "/healthz", "/"])
async def test_a_foreign_host_is_refused(doors: Gateways, name: str, path: str) -> None:
    """DNS rebinding: a page at evil.example whose name now resolves to 127.0.0.1 reaches the
    gateway with its own Host header, and would read the answer as same-origin."""
    port = doors.ports[name]
    target = ROUTES[name] if path == "route" else path
    if path == "route":
        request = post(
            target, _json(name), host=f"evil.example:{port}", content_type="application/json"
        )
    else:
        request = f"GET {target} HTTP/1.1\r\nhost: evil.example:{port}\r\nconnection: close\r\n\r\n"
        request = request.encode()  # type: ignore[assignment]
    _refused(await exchange(port, request), 421, "HOST_NOT_ALLOWED")  # type: ignore[arg-type]


@pytest.mark.parametrize("name", NAMES)
async def test_the_gateways_own_origin_and_loopback_names_are_served(
    doors: Gateways, name: str
) -> None:
    port = doors.ports[name]
    for host in (f"127.0.0.1:{port}", f"localhost:{port}"):
        async with httpx.AsyncClient(timeout=WAIT) as http:
            answer = await http.post(
                f"http://127.0.0.1:{port}{ROUTES[name]}",
                json=valid_body(name),
                headers={"host": host, "origin": f"http://{host}", **headers_for(name)},
            )
        assert answer.status_code == 200, answer.text
        assert "access-control-allow-origin" not in answer.headers


@pytest.mark.parametrize("name", NAMES)
async def test_configured_hosts_and_origins_are_served_with_cors(tmp_path: Path, name: str) -> None:
    app = "https://app.test"
    async with gateways(tmp_path, allowed_hosts=["agent.test"], cors_origins=[app]) as doors:
        url = f"{doors.url(name)}{ROUTES[name]}"
        host = {"host": f"agent.test:{doors.ports[name]}"}
        async with httpx.AsyncClient(timeout=WAIT) as http:
            preflight = await http.options(
                url,
                headers={
                    **host,
                    "origin": app,
                    "access-control-request-method": "POST",
                    "access-control-request-headers": "authorization, content-type",
                },
            )
            assert preflight.status_code == 200
            assert preflight.headers["access-control-allow-origin"] == app
            answer = await http.post(
                url, json=valid_body(name), headers={**host, "origin": app, **headers_for(name)}
            )
            assert answer.status_code == 200, answer.text
            assert answer.headers["access-control-allow-origin"] == app
            other = await http.post(
                url, json=valid_body(name), headers={**host, "origin": EVIL, **headers_for(name)}
            )
            assert (other.status_code, other.json()["error"]["reason"]) == (
                403,
                "ORIGIN_NOT_ALLOWED",
            )
            elsewhere = await http.post(url, json=valid_body(name), headers={"host": "x.test"})
            assert elsewhere.status_code == 421


# --- bodies ------------------------------------------------------------------------------------


def _rss() -> int:
    """This process's resident memory in bytes (the gateways run in it)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def _send_body(port: int, head: bytes, size: int, *, chunked: bool) -> RawAnswer:
    """Send `head` then `size` bytes of a JSON string while reading the answer, so the
    answer is read even if the server closes before the body is through."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    piece = b"x" * 65536

    async def write() -> None:
        writer.write(head + (b"" if chunked else b'"'))
        sent = 0
        while sent < size:
            writer.write(b"10000\r\n" + piece + b"\r\n" if chunked else piece)
            await writer.drain()
            sent += len(piece)
        writer.write(b"0\r\n\r\n" if chunked else b'"')
        await writer.drain()

    writing = asyncio.create_task(write())
    data = b""
    try:
        async with asyncio.timeout(WAIT):
            while chunk := await reader.read(65536):
                data += chunk
    except ConnectionResetError:
        pass  # the server closed on a body still arriving: its answer came first
    finally:
        writing.cancel()
        await asyncio.gather(writing, return_exceptions=True)
        writer.close()
    return parse(data)


@pytest.mark.parametrize("name", NAMES)
async def test_ten_megabyte_bodies_are_refused_and_memory_stays_bounded(
    tmp_path: Path, name: str
) -> None:
    """Twenty 10 MB bodies at once, without a token (the A2A gateway once kept them all:
    +317 MB), half declared up front, half streamed chunked: each 413, and the process grows
    by less than a bound far below what they hold (at most 20 x 1 MiB is ever buffered)."""
    async with gateways(tmp_path, max_request_bytes=1024 * 1024) as doors:
        await _flood(doors, name)


async def _flood(doors: Gateways, name: str) -> None:
    port = doors.ports[name]
    accept = "".join(f"{k}: {v}\r\n" for k, v in headers_for(name).items())
    size = 10 * 1024 * 1024
    base = f"POST {ROUTES[name]} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
    declared = f"{base}{accept}content-length: {size + 2}\r\n\r\n".encode()
    chunked = f"{base}{accept}transfer-encoding: chunked\r\n\r\n".encode()
    await doors.served(name)  # warm up
    before = _rss()
    answers = await asyncio.gather(
        *(_send_body(port, declared, size, chunked=False) for _ in range(10)),
        *(_send_body(port, chunked, size, chunked=True) for _ in range(10)),
    )
    growth = _rss() - before
    assert growth < 64 * 1024 * 1024, f"grew {growth / 2**20:.0f} MiB"
    for answer in answers:
        _refused(answer, 413, "REQUEST_TOO_LARGE")
    assert await doors.served(name)


NESTED = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(
    ("body", "status", "reason"),
    [
        (NESTED, 413, "JSON_TOO_DEEP"),
        (b'{"a": ' * 65 + b"1" + b"}" * 65, 413, "JSON_TOO_DEEP"),
        (b'{"text": "\\ud800"}', 400, "INVALID_JSON"),
        (b'{"n": NaN}', 400, "INVALID_JSON"),
        (b'{"n": 1e999}', 400, "INVALID_JSON"),
        (b'{"n": ' + b"9" * 4301 + b"}", 400, "INVALID_JSON"),
        (b'{"t": "\xff\xfe"}', 400, "INVALID_JSON"),
        (b"[" + b"{}," * 50_000 + b"{}]", 413, "TOO_MANY_ITEMS"),
        (b'{"unterminated": ', 400, "INVALID_JSON"),
    ],
    ids=[
        "100000 deep",
        "65 deep",
        "lone surrogate",
        "NaN",
        "1e999",
        "4301 digits",
        "not utf-8",
        "50000 parts",
        "truncated",
    ],
)
async def test_json_no_parser_downstream_could_take_is_refused(
    doors: Gateways, name: str, body: bytes, status: int, reason: str
) -> None:
    request = post(ROUTES[name], body, content_type="application/json", **headers_for(name))
    _refused(await exchange(doors.ports[name], request), status, reason)


async def test_a_lone_surrogate_in_a_messages_content_is_refused(doors: Gateways) -> None:
    """The AG-UI repro: a message whose content is "\\ud800" answered 500."""
    body = valid_body("agui")
    body["messages"][0]["content"] = "\ud800"
    raw = json.dumps(body).encode()  # ensure_ascii: the surrogate travels as \\ud800
    answer = await exchange(
        doors.ports["agui"], post("/agui", raw, content_type="application/json")
    )
    _refused(answer, 400, "INVALID_JSON")


async def test_a2a_parts_beyond_the_item_limit_are_refused(doors: Gateways) -> None:
    body = valid_body("a2a")
    body["params"]["message"]["parts"] = [{"text": ""}] * 50_000
    answer = await exchange(
        doors.ports["a2a"], post("/", json.dumps(body).encode(), content_type="application/json")
    )
    _refused(answer, 413, "TOO_MANY_ITEMS")


@pytest.mark.parametrize("name", NAMES)
async def test_two_authorization_headers_are_refused(doors: Gateways, name: str) -> None:
    """A wrong token then the right one: which counts would be ambiguous, so neither does."""
    request = post(ROUTES[name], _json(name), **headers_for(name), content_type="application/json")
    head, _, body = request.partition(b"\r\n\r\n")
    twice = head + b"\r\nauthorization: Bearer wrong\r\nauthorization: Bearer right\r\n\r\n"
    _refused(await exchange(doors.ports[name], twice + body), 401, "MULTIPLE_CREDENTIALS")


# --- connections -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
async def test_oversized_headers_get_431(doors: Gateways, name: str) -> None:
    request = f"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\nx-big: {'a' * 20_000}\r\n\r\n"
    _refused(await exchange(doors.ports[name], request.encode()), 431, "HEADERS_TOO_LARGE")


async def _trickle(port: int, head: bytes) -> RawAnswer:
    """A slowloris client: `head`, then one more byte whenever the server stays silent for a
    moment, until it answers and closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(head)
    data = b""
    try:
        async with asyncio.timeout(WAIT):
            while True:
                try:
                    async with asyncio.timeout(0.2):
                        chunk = await reader.read(65536)
                except TimeoutError:
                    writer.write(b"x")  # silence: send the next byte
                    continue
                if not chunk:
                    return parse(data)
                data += chunk
    finally:
        writer.close()


@pytest.mark.parametrize("name", NAMES)
async def test_slow_clients_are_closed_while_valid_requests_succeed(
    tmp_path: Path, name: str
) -> None:
    """25 clients trickling their headers and 5 trickling a body: each gets 408 and its
    connection closed once the configured time is up, while a valid request is served."""
    async with gateways(tmp_path, header_timeout=1.0, body_timeout=1.0) as doors:
        port = doors.ports[name]
        headers = b"POST / HTTP/1.1\r\nhost: 127.0.0.1\r\nx-slow: "
        body = (
            f"POST {ROUTES[name]} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json"
            "\r\ncontent-length: 100000\r\n\r\n"
        ).encode()
        slow = [asyncio.create_task(_trickle(port, headers)) for _ in range(25)]
        slow += [asyncio.create_task(_trickle(port, body)) for _ in range(5)]
        assert await doors.served(name)
        answers = await asyncio.gather(*slow)
    for answer in answers:
        _refused(answer, 408, "REQUEST_TIMEOUT")


@pytest.mark.parametrize("name", NAMES)
async def test_an_idle_keep_alive_connection_is_closed(tmp_path: Path, name: str) -> None:
    async with gateways(tmp_path, idle_timeout=0.5) as doors:
        reader, writer = await asyncio.open_connection("127.0.0.1", doors.ports[name])
        try:
            writer.write(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
            async with asyncio.timeout(WAIT):
                head = await reader.readuntil(b"\r\n\r\n")
                answer = parse(head)
                assert answer.status == 200
                await reader.readexactly(int(answer.headers["content-length"]))
                assert await reader.read() == b""  # the server closed the idle connection
        finally:
            writer.close()


@pytest.mark.parametrize("name", NAMES)
async def test_one_connection_over_the_cap_is_refused(tmp_path: Path, name: str) -> None:
    async with gateways(tmp_path, max_connections=3) as doors:
        port = doors.ports[name]
        held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(3)]
        try:
            over = await exchange(port, b"")
            _refused(over, 503, "TOO_MANY_CONNECTIONS")
        finally:
            for _, writer in held:
                writer.close()
                await writer.wait_closed()
        assert await doors.served(name)
