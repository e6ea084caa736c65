"""What the gateway reads from an HTTP request before a run, and its HTTP errors."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import grpc
from starlette.requests import Request
from starlette.responses import JSONResponse

from hookmesh.client import AgentClientError
from hookmesh.errors import FieldViolation

_HTTP_STATUS = {
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.UNAVAILABLE: 503,
}
"""Agent refusals that answer the request itself; any other becomes the run's RUN_ERROR."""


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


def refusal(exc: AgentClientError, agent: str) -> HttpError | None:
    """The HTTP error for an agent's refusal (None for one that becomes a RUN_ERROR). An agent
    that does not answer is said in words the page can show: its address, and that it is
    down (`agent`: the agent service's address)."""
    status = _HTTP_STATUS.get(exc.code)
    if status is None:
        return None
    if exc.code == grpc.StatusCode.UNAVAILABLE and not exc.reason:
        return HttpError(
            503, "AGENT_UNAVAILABLE", f"the agent service at {agent} does not answer: is it up?"
        )
    return HttpError(status, exc.reason or exc.code.name, exc.message, exc.violations)
