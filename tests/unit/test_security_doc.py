"""docs/security.md states the HTTP doors' limits and the sidecar breaker's thresholds as the
code has them: a default changed in one place fails here until the other follows."""

from __future__ import annotations

import re
from pathlib import Path

from hookmesh.remote import BreakerSettings
from hookmesh.server import HttpGatewaySettings
from hookmesh.services.agui import AguiGatewayConfig

DOC = (Path(__file__).parents[2] / "docs" / "security.md").read_text()
_UNITS = {"MiB": 1024 * 1024, "KiB": 1024, "s": 1, "": 1}
_ROW = re.compile(r"^\| `(\w+)` \| ([\d,]+)\s*(MiB|KiB|s)?\b", re.MULTILINE)


def test_every_http_limit_is_documented_with_its_default() -> None:
    documented = {
        key: int(number.replace(",", "")) * _UNITS[unit or ""]
        for key, number, unit in _ROW.findall(DOC)
    }
    fields = HttpGatewaySettings.model_fields
    limits = set(fields) - {"allowed_hosts", "cors_origins", "auth"}
    limits -= {"metrics_listen", "metrics_allowed_hosts", "metrics_token_env"}
    assert {k: documented.get(k) for k in limits} == {k: fields[k].default for k in limits}
    agui = AguiGatewayConfig.model_fields["max_request_bytes"].default // (1024 * 1024)
    assert f"(AG-UI {agui} MiB)" in DOC
    for key in ("allowed_hosts", "cors_origins"):
        assert f"`{key}`" in DOC


def test_the_breaker_section_states_the_default_thresholds() -> None:
    section = DOC.split("## Sidecars that hang", 1)[1].split("\n## ", 1)[0]
    defaults = BreakerSettings()
    assert f"after {defaults.misses} consecutive missed deadlines" in section
    assert f"({defaults.backoff:g} s, doubling to {defaults.max_backoff:g} s)" in section
