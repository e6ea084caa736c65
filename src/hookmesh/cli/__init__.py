"""The `hookmesh` command: one module per command group, registered on import."""

# Imported only for their registrations on `app`.
from hookmesh.cli import (  # noqa: F401
    _a2a,
    _admin,
    _agui,
    _chat,
    _conformance,
    _mcp,
    _memory,
    _retrieval,
    _rollout,
    _serve,
    _sessions,
    _sidecar,
    _speech,
    _suite,
)
from hookmesh.cli._app import app, main
from hookmesh.cli._printer import EventPrinter

__all__ = ["EventPrinter", "app", "main"]
