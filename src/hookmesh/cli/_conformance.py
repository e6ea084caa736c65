"""`hookmesh conformance`: check a sidecar against the remote protocol's rules."""

from __future__ import annotations

from hookmesh.cli._app import app
from hookmesh.conformance import conformance_command

app.command("conformance")(conformance_command)
