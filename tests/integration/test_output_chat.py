"""`hookmesh chat --output-schema` and `chat.js --output-schema` against a live agent service:
the same structured answer, the same JSON lines, the same refusal of a bad schema."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from hookmesh.agent import FINAL_TOOL
from hookmesh.services.agent import load_config, start_agent_service
from tests.e2e.commands import run
from tests.node_process import NODE_DIR, node_binary, run_node

pytestmark = pytest.mark.timeout(90)

_CHAT = NODE_DIR / "chat.js"
_NODE_TIMEOUT = 20.0
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "temp_c": {"type": "number"}},
    "required": ["city", "temp_c"],
}
ANSWER = {"city": "Oslo", "temp_c": -3}


@pytest.fixture
async def target(tmp_path: Path) -> AsyncIterator[str]:
    """A live agent service whose scripted model answers through the final-answer tool."""
    node_binary()
    turns: list[Any] = [{"tool_calls": [{"name": FINAL_TOOL, "arguments": ANSWER}]}]
    config = load_config(
        None,
        store=f"sqlite:///{tmp_path}/agent.db",
        models={"default": {"type": "scripted", "turns": turns}},
    )
    service = await start_agent_service(config, address="127.0.0.1:0")
    try:
        yield f"127.0.0.1:{service.port}"
    finally:
        await service.stop(None)


async def _both(target: str, *args: str) -> tuple[tuple[int, str, str], tuple[int, str, str]]:
    python = await run("chat", "--target", target, *args)
    node = await run_node(
        node_binary(), str(_CHAT), "--target", target, *args, timeout=_NODE_TIMEOUT
    )
    return python, node


def _schema_file(tmp_path: Path, schema: Any) -> str:
    path = tmp_path / "Weather.json"
    path.write_text(json.dumps(schema))
    return str(path)


async def test_both_chats_print_the_structured_answer(target: str, tmp_path: Path) -> None:
    schema = _schema_file(tmp_path, SCHEMA)
    for code, out, err in await _both(target, "--output-schema", schema, "Weather?"):
        assert code == 0, err
        assert '[output Weather] {"city":"Oslo","temp_c":-3}' in out.splitlines()


def _ends(out: str) -> list[dict[str, Any]]:
    return [e for e in map(json.loads, out.splitlines()) if e["type"] == "reply_end"]


async def test_both_chats_put_the_answer_in_the_json_reply_end(target: str, tmp_path: Path) -> None:
    schema = _schema_file(tmp_path, SCHEMA)
    python, node = await _both(target, "--json", "--output-schema", schema, "Weather?")
    assert python[0] == node[0] == 0, (python[2], node[2])
    for (end,) in (_ends(python[1]), _ends(node[1])):
        assert end["output"] == {"value": ANSWER, "schema_name": "Weather"}


async def test_both_chats_refuse_a_bad_schema_with_exit_2(target: str, tmp_path: Path) -> None:
    schema = _schema_file(tmp_path, {"type": "objekt"})
    for code, out, err in await _both(target, "--output-schema", schema, "Weather?"):
        assert code == 2 and out == ""
        assert "INVALID_OUTPUT_SCHEMA" in err and "output_schema.schema.type" in err


async def test_both_chats_refuse_a_file_without_a_schema_with_exit_2(
    target: str, tmp_path: Path
) -> None:
    for content in ("not json", "[1]"):
        path = tmp_path / "bad.json"
        path.write_text(content)
        for code, _, err in await _both(target, "--output-schema", str(path), "Weather?"):
            assert code == 2 and "--output-schema" in err
