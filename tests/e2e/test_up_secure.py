"""`hookmesh up --token-env`: every server of the suite checks callers, each user sees only
their own data, and the suite's parts reach each other with a token of their own."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.e2e.commands import DEADLINE, run, start_up

pytestmark = pytest.mark.timeout(180)

ENV = {"SUITE_USERS": "alice:alice-token,bob:bob-token", "ALICE": "alice-token", "BOB": "bob-token"}


def mcp_client(url: str, token: str | None) -> Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers)))


async def test_a_secured_suite_checks_every_caller_and_keeps_users_apart(
    tmp_path: Path,
) -> None:
    config = tmp_path / "suite.yaml"
    config.write_text(
        f"""
listen: 127.0.0.1:0
store: sqlite:///{tmp_path}/agent.db
grace_seconds: 1
models:
  default:
    type: scripted
    turns:
      - tool_calls: [{{name: get_weather, arguments: {{city: Oslo}}}}]
      - Noted.
      - Noted.
tools: ["hookmesh.suite.demo:get_weather"]
middlewares:
  - type: local
    import: hookmesh.middleware.builtin.memory:MemoryMiddleware
    params: {{target: "service:memory", mode: static_control}}
  - {{type: remote, sidecar: audit}}
sidecars:
  - {{name: audit, middleware: "hookmesh.suite.demo:AuditTrail", listen: "127.0.0.1:0"}}
services:
  memory: {{listen: 127.0.0.1:0, store: "sqlite:///{tmp_path}/memory.db"}}
  a2a: {{listen: 127.0.0.1:0}}
  mcp: {{listen: 127.0.0.1:0}}
"""
    )
    suite = await start_up("--config", str(config), "--token-env", "SUITE_USERS", env=ENV)
    agent = ("--target", suite.addresses["agent"])
    memory = ("--target", suite.addresses["memory"])
    try:
        code, _, err = await run("chat", *agent, "I drink green tea every morning.", env=ENV)
        assert code == 1 and "CREDENTIALS_REQUIRED" in err, err
        said = "I drink green tea every morning."
        code, out, err = await run("chat", *agent, "--json", "--token-env", "ALICE", said, env=ENV)
        assert code == 0, err
        events = [json.loads(line) for line in out.splitlines()]
        # The agent reached its sidecar, and the memory middleware the memory service, with
        # the suite's own token; the memory was written for alice, the caller.
        assert any(e.get("name") == "audit_trail (sidecar)" for e in events)
        assert events[-1]["finish_reason"] == "FINISH_REASON_COMPLETED"
        drink = ("memory", "search", "what does the user drink", *memory)
        code, out, err = await run(*drink, "--user", "alice", "--token-env", "ALICE", env=ENV)
        assert code == 0 and said in out, err
        code, out, err = await run(*drink, "--user", "bob", "--token-env", "BOB", env=ENV)
        assert code == 0 and said not in out, out
        code, _, err = await run(*drink, "--user", "alice", env=ENV)
        assert code == 1 and "CREDENTIALS_REQUIRED" in err

        async with httpx.AsyncClient(timeout=DEADLINE) as http:
            card = (await http.get(suite.addresses["a2a"])).json()
            anonymous = await http.post(suite.addresses["mcp"], json={})
        assert card["securityRequirements"] and "bearer" in json.dumps(card["securitySchemes"])
        assert anonymous.status_code == 401
        async with asyncio.timeout(DEADLINE):
            async with mcp_client(suite.addresses["mcp"], "alice-token") as alice:
                recalled = await alice.call_tool("recall", {"query": "what does the user drink"})
            async with mcp_client(suite.addresses["mcp"], "bob-token") as bob:
                not_bobs = await bob.call_tool("recall", {"query": "what does the user drink"})
        assert said in recalled.content[0].text  # type: ignore[union-attr]
        assert said not in not_bobs.content[0].text  # type: ignore[union-attr]
    finally:
        code, log = await suite.stop()
    assert code == 0, log


async def test_a_secured_suite_keeps_each_users_knowledge_bases_its_own(tmp_path: Path) -> None:
    """With tokens, retrieval owns bases by creator: bob can neither list, read nor delete
    alice's base (without `up --token-env` there are no grants, so anyone could)."""
    config = tmp_path / "suite.yaml"
    config.write_text(
        f"""
listen: 127.0.0.1:0
store: sqlite:///{tmp_path}/agent.db
grace_seconds: 1
services:
  retrieval: {{listen: 127.0.0.1:0, store: "sqlite:///{tmp_path}/retrieval.db"}}
"""
    )
    suite = await start_up("--config", str(config), "--token-env", "SUITE_USERS", env=ENV)
    kb = ("--target", suite.addresses["retrieval"])
    try:
        code, _, err = await run("kb", "create", "handbook", *kb, "--token-env", "ALICE", env=ENV)
        assert code == 0, err
        code, out, err = await run("kb", "list", "--json", *kb, "--token-env", "BOB", env=ENV)
        assert (code, out) == (0, ""), err
        refused = ("KNOWLEDGE_BASE_NOT_GRANTED", "PERMISSION_DENIED")
        for command in (("kb", "delete", "handbook"), ("search", "pay", "--kb", "handbook")):
            code, _, err = await run(*command, *kb, "--token-env", "BOB", env=ENV)
            assert code == 1 and any(r in err for r in refused), err
        code, out, err = await run("kb", "list", "--json", *kb, "--token-env", "ALICE", env=ENV)
        assert code == 0 and [json.loads(line)["name"] for line in out.splitlines()] == [
            "handbook"
        ], err
    finally:
        code, log = await suite.stop()
    assert code == 0, log
