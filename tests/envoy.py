"""The Envoy config the mesh tests run: the one shipped in deploy/envoy/ (with
`hookmesh.testing.EnvoyProxy`)."""

from __future__ import annotations

from pathlib import Path

CONFIG = Path(__file__).resolve().parents[1] / "deploy" / "envoy" / "hookmesh.yaml"
