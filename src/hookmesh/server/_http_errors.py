"""The HTTP gateways' one error shape, ``{"error": {code, reason, message}}``, as an ASGI
response or as raw bytes for the connection layer (before any request exists)."""

from __future__ import annotations

import http
import json

from starlette.types import Send


class HttpRefusal(Exception):
    """A request refused before the app sees it.

    Args:
        status: The HTTP status.
        reason: Stable UPPER_SNAKE reason, as in gRPC errors.
        message: Short, English, free of the request's content.
    """

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message


def error_body(status: int, reason: str, message: str) -> bytes:
    """The JSON body of an error."""
    error = {"code": status, "reason": reason, "message": message}
    return json.dumps({"error": error}).encode()


async def send_refusal(send: Send, refusal: HttpRefusal, *, close: bool) -> None:
    """Answer with `refusal`; `close` asks the server to close the connection after it (a
    body left unread is then never drained)."""
    body = error_body(refusal.status, refusal.reason, refusal.message)
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": refusal.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def raw_response(status: int, reason: str, message: str) -> bytes:
    """A whole HTTP/1.1 error response that closes the connection, written straight to the
    socket (a connection refused before a request could be read)."""
    body = error_body(status, reason, message)
    phrase = http.HTTPStatus(status).phrase
    head = (
        f"HTTP/1.1 {status} {phrase}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body
