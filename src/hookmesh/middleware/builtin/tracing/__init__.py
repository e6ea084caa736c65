"""Tracing: OpenTelemetry spans for replies, model calls and tool runs (GenAI conventions)."""

from hookmesh.middleware.builtin.tracing._middleware import (
    TracingMiddleware,
)

__all__ = [
    "TracingMiddleware",
]
