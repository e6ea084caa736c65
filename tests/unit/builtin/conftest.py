"""Fixtures of the built-in middleware tests."""

from __future__ import annotations

from collections.abc import Callable

import pytest


@pytest.fixture
def remote_gap(request: pytest.FixtureRequest) -> Callable[[str], None]:
    """Declare that the sidecar run of this test needs a remote-protocol feature that does
    not exist yet: that run is a strict xfail (it must fail; once the feature lands it
    passes, the strict xfail turns red, and the declaration goes)."""

    def declare(feature: str) -> None:
        callspec = getattr(request.node, "callspec", None)
        if callspec is not None and callspec.params.get("attach") == "sidecar":
            request.node.add_marker(
                pytest.mark.xfail(strict=True, reason=f"remote protocol lacks: {feature}")
            )

    return declare
