"""What the gateway reads from an HTTP request before a run, and its HTTP errors."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from hookmesh.errors import FieldViolation


class HttpError(Exception):
    """A request answered with an HTTP error and a JSON body: ``{"error": {code, reason,
    message, violations?}}``."""

    def __init__(
        self, status: int, reason: str, message: str, violations: Iterable[FieldViolation] = ()
    ) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message
        self.violations = list(violations)

    def response(self) -> JSONResponse:
        error: dict[str, Any] = {
            "code": self.status,
            "reason": self.reason,
            "message": self.message,
        }
        if self.violations:
            error["violations"] = [
                {"field": v.field, "description": v.description} for v in self.violations
            ]
        return JSONResponse({"error": error}, status_code=self.status)


def bearer_token(request: Request) -> str | None:
    """The caller's bearer token, passed through to the agent (a secret: never logged)."""
    header = request.headers.get("authorization")
    if header is None:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise HttpError(401, "UNAUTHENTICATED", "send `Authorization: Bearer <token>`")
    return token.strip()
