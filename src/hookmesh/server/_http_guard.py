"""The checks every HTTP gateway runs before its app sees a request: Host and Origin, at most
one ``authorization`` header, CORS for configured origins only, JSON bodies only (no
text/plain or form posts, the ones a page may send cross-origin without asking), the body read
in full within its size and time limits and checked as JSON, then handed to the app."""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from hookmesh.server._http_errors import HttpRefusal, send_refusal
from hookmesh.server._http_json import check_json
from hookmesh.server._http_origin import OriginPolicy
from hookmesh.server._http_settings import HttpGatewaySettings

_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})


class _Disconnected(Exception):
    """The client went away while sending its body."""


def _is_json(content_type: str | None) -> bool:
    """``application/json`` or ``application/*+json``, parameters allowed."""
    if content_type is None:
        return False
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


class HttpGuard:
    """ASGI middleware in front of a gateway's app (lifespan passes through untouched).

    Args:
        app: The gateway's ASGI app.
        settings: Its hosts, origins and limits.
    """

    def __init__(self, app: ASGIApp, settings: HttpGatewaySettings) -> None:
        self._settings = settings
        self._policy = OriginPolicy(settings.allowed_hosts, settings.cors_origins)
        self._app: ASGIApp = app
        if settings.cors_origins:
            self._app = CORSMiddleware(
                app,
                allow_origins=settings.cors_origins,
                allow_methods=["GET", "POST", "DELETE"],
                allow_headers=["*"],
            )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        try:
            self._check_size(scope)
            self._policy.check(headers.get("host"), headers.get("origin"))
            if len(headers.getlist("authorization")) > 1:
                # NOTE(hookmesh): which of several tokens counts is ambiguous (a proxy adding
                # its own in front of the caller's, a caller trying tokens): none does, as
                # on every gRPC service.
                raise HttpRefusal(
                    401, "MULTIPLE_CREDENTIALS", "send exactly one 'authorization' header"
                )
            if not self._has_body(scope, headers):
                await self._app(scope, receive, send)
                return
            if not _is_json(headers.get("content-type")):
                raise HttpRefusal(
                    415,
                    "UNSUPPORTED_MEDIA_TYPE",
                    "send the body as JSON (Content-Type: application/json)",
                )
            body = await self._read(receive, headers)
            if body:  # an empty body is the app's to judge
                check_json(body, self._settings.max_json_depth, self._settings.max_json_items)
        except HttpRefusal as refusal:
            # A body may be left unread: closing the connection never drains it.
            await send_refusal(send, refusal, close=True)
            return
        except _Disconnected:
            return
        await self._app(scope, _replay(body, receive), send)

    def _check_size(self, scope: Scope) -> None:
        """Headers that arrived whole in one read pass h11's limit (it bounds only what it
        buffers while waiting): count them here.

        Raises:
            HttpRefusal: 431 ``HEADERS_TOO_LARGE``.
        """
        limit = self._settings.max_header_bytes
        size = len(scope.get("raw_path") or b"") + len(scope["query_string"])
        size += sum(len(name) + len(value) + 4 for name, value in scope["headers"])
        if size > limit:
            raise HttpRefusal(
                431, "HEADERS_TOO_LARGE", f"the request headers are over {limit} bytes"
            )

    def _has_body(self, scope: Scope, headers: Headers) -> bool:
        """Whether the body rules apply: every POST, PUT and PATCH (empty ones too, so a
        body-less form post is refused as well), and any other request that sends a body."""
        if scope["method"] in _WITH_BODY or "transfer-encoding" in headers:
            return True
        return headers.get("content-length", "0").strip() not in ("", "0")

    async def _read(self, receive: Receive, headers: Headers) -> bytes:
        """The whole body, within `max_request_bytes` and `body_timeout`.

        Raises:
            HttpRefusal: 413 ``REQUEST_TOO_LARGE`` or 408 ``REQUEST_TIMEOUT``.
            _Disconnected: The client closed the connection first.
        """
        limit = self._settings.max_request_bytes
        too_large = HttpRefusal(413, "REQUEST_TOO_LARGE", f"the body is over {limit} bytes")
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise too_large
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self._settings.body_timeout):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        raise _Disconnected
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > limit:
                        raise too_large
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        return b"".join(chunks)
        except TimeoutError:
            raise HttpRefusal(
                408,
                "REQUEST_TIMEOUT",
                f"the body did not arrive within {self._settings.body_timeout:g} s",
            ) from None


def _replay(body: bytes, receive: Receive) -> Receive:
    """`receive` that first hands the app the body already read, then waits on the client
    (for its disconnect) as before."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            message: dict[str, Any] = {"type": "http.request", "body": body, "more_body": False}
            return message
        return await receive()

    return replay
