"""Declared order: `before`/`after` (by key) decide the chain's order over the configured
one, deterministically; a contradiction gets one clear error at start and at reload."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml

from hookmesh.client import AdminClient, AgentClientError
from hookmesh.middleware import declared_order
from hookmesh.services.agent import load_config, start_agent_service
from hookmesh.services.agent._chain import build_chain
from tests.agent_helpers import SHORT_TIMEOUT

pytestmark = pytest.mark.timeout(60)

CYCLE = "the middlewares' order declarations contradict: tagger-a before tagger-b before tagger-a"


def _tagger(name: str, **order: list[str]) -> dict[str, Any]:
    return {
        "type": "local",
        "import": "tests.middlewares:Tagger",
        "params": {"name": name},
        **order,
    }


def _config(tmp_path: Path, middlewares: list[dict[str, Any]], **more: Any) -> Path:
    path = tmp_path / "agent.yaml"
    path.write_text(
        yaml.safe_dump({"store": f"sqlite:///{tmp_path}/a.db", "middlewares": middlewares, **more})
    )
    return path


async def test_declarations_reorder_the_chain_and_the_rest_keeps_its_configured_order(
    tmp_path: Path,
) -> None:
    middlewares = [
        _tagger("a"),
        _tagger("b", after=["tagger-c"]),
        _tagger("c"),
        _tagger("d", before=["tagger-a"]),
    ]
    for _ in range(3):  # the same config always gives the same chain
        chain = await build_chain(load_config(_config(tmp_path, middlewares)), {})
        # c must wrap b, d must wrap a; among those free to go, the configured first goes.
        assert chain.keys() == ["tagger-c", "tagger-b", "tagger-d", "tagger-a"]
        await chain.close()
    assert declared_order(["x", "y", "z"], [[], [], []], [[], [], []]) == [0, 1, 2]


async def test_a_cycle_is_refused_at_start_and_at_reload(tmp_path: Path) -> None:
    cycle = [_tagger("a", before=["tagger-b"]), _tagger("b", before=["tagger-a"])]
    with pytest.raises(ValueError) as refused:
        await build_chain(load_config(_config(tmp_path, cycle)), {})
    assert str(refused.value) == CYCLE
    with pytest.raises(ValueError) as unknown:
        await build_chain(load_config(_config(tmp_path, [_tagger("a", after=["nope"])])), {})
    assert str(unknown.value) == (
        "middlewares[0] (tagger-a): after names 'nope', which no middleware has; keys: tagger-a"
    )

    (tmp_path / "tokens").write_text("ops:ops-token\n")
    more = {"auth": {"token_file": str(tmp_path / "tokens")}, "admin_principals": ["ops"]}
    path = _config(tmp_path, [_tagger("a")], **more)
    service = await start_agent_service(
        load_config(path), address="127.0.0.1:0", reload_from=lambda: load_config(path)
    )
    try:
        _config(tmp_path, cycle, **more)
        async with AdminClient(
            f"127.0.0.1:{service.port}", timeout=SHORT_TIMEOUT, token="ops-token"
        ) as ops:
            with pytest.raises(AgentClientError) as invalid:
                await ops.reload_middlewares()
        assert (invalid.value.code, invalid.value.reason) == (
            grpc.StatusCode.FAILED_PRECONDITION,
            "INVALID_CONFIG",
        )
        assert CYCLE in str(invalid.value)
        assert service.servicer.chain.keys() == ["tagger-a"]
    finally:
        await service.stop(None)
