"""The Node.js AgentService client and chat CLI of clients/node, against a live agent service."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hookmesh.services.agent import load_config, start_agent_service
from tests.node_process import NODE_DIR, node_binary, run_node

pytestmark = pytest.mark.timeout(60)

_CHAT = NODE_DIR / "chat.js"
_NODE_TIMEOUT = 20.0
"""Seconds one node process may take, proto loading included."""

# Each reply is two model calls: a tool call, then the answer. The script repeats, so every
# reply of a test (run one after another) sees the same two turns.
_TURNS: list[Any] = [
    {"tool_calls": [{"name": "echo", "arguments": {"text": "hi"}}]},
    "the answer",
]


@dataclass
class _Run:
    """What a finished node process left behind."""

    code: int
    stdout: str
    stderr: str


async def _run_node(*args: str, stdin: str = "") -> _Run:
    """Run `node ARGS` to its end, fed `stdin`, within a deadline, without blocking the
    event loop."""
    return _Run(*await run_node(node_binary(), *args, timeout=_NODE_TIMEOUT, stdin=stdin))


async def _chat(target: str, *args: str) -> _Run:
    return await _run_node(str(_CHAT), "--target", target, "--timeout", "15", *args)


@pytest.fixture
async def target(tmp_path: Path) -> AsyncIterator[str]:
    """The address of a live agent service with a scripted model and the echo tool."""
    node_binary()  # fail before starting anything
    config = load_config(
        None,
        store=f"sqlite:///{tmp_path}/agent.db",
        tools=["tests.agent_helpers:echo"],
        models={"default": {"type": "scripted", "turns": _TURNS}},
    )
    service = await start_agent_service(config, address="127.0.0.1:0")
    try:
        yield f"127.0.0.1:{service.port}"
    finally:
        await service.stop(None)


# --- chat.js ---------------------------------------------------------------------------------


async def test_chat_json_prints_every_event_as_one_line(target: str) -> None:
    run = await _chat(target, "--json", "hello")

    assert run.code == 0, run.stderr
    assert run.stderr == ""
    events = [json.loads(line) for line in run.stdout.splitlines()]
    types = [e["type"] for e in events]
    start, end = events[0], events[-1]
    assert start["type"] == "reply_start"
    assert start["session_id"]
    assert start["agent_name"] == "assistant"
    assert end["type"] == "reply_end"
    assert end["finish_reason"] == "FINISH_REASON_COMPLETED"
    assert end["session_id"] == start["session_id"]
    assert types.count("reply_start") == types.count("reply_end") == 1
    assert {e["reply_id"] for e in events} == {start["reply_id"]}

    calls = [e for e in events if e["type"] == "tool_call_start"]
    assert [c["name"] for c in calls] == ["echo"]
    results = [e for e in events if e["type"] == "tool_result_end"]
    assert [(r["call_id"], r["state"]) for r in results] == [
        (calls[0]["call_id"], "TOOL_RESULT_STATE_SUCCESS")
    ]
    deltas = [e for e in events if e["type"] == "text_block_delta"]
    assert "".join(d["delta"] for d in deltas) == "the answer"
    # The tool ran before the answer streamed.
    assert types.index("tool_result_end") < types.index("text_block_delta")


async def test_chat_prints_a_readable_reply(target: str) -> None:
    run = await _chat(target, "hello")

    assert run.code == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("session: ")
    assert '→ echo {"text": "hi"}' in lines
    assert "← echo success: hi" in lines
    assert "the answer" in lines
    assert lines[-1] == "end: completed"
    assert lines.index("← echo success: hi") < lines.index("the answer")


async def test_chat_continues_a_session(target: str) -> None:
    first = await _chat(target, "--json", "hello")
    session_id = json.loads(first.stdout.splitlines()[0])["session_id"]

    second = await _chat(target, "--json", "--session", session_id, "again")

    assert second.code == 0, second.stderr
    events = [json.loads(line) for line in second.stdout.splitlines()]
    assert events[0]["session_id"] == events[-1]["session_id"] == session_id


async def test_chat_a_value_the_service_refuses_exits_2_with_its_reason(target: str) -> None:
    run = await _chat(target, "--session", "bad id!", "hello")

    assert run.code == 2
    assert run.stdout == ""
    assert run.stderr == (
        "error: session_id: use 1-128 characters of A-Z a-z 0-9 . _ : - [INVALID_SCHEMA]\n"
    )


async def test_chat_unreachable_target_exits_1() -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]

    run = await _chat(f"127.0.0.1:{port}", "hello")

    assert run.code == 1
    assert run.stderr == (
        f"error: nothing listens on 127.0.0.1:{port}: start it with 'hookmesh up' or pass "
        "--target\n"
    )


@pytest.mark.parametrize(
    "args",
    [[], ["--target", "127.0.0.1:1"], ["--nope", "hello"], ["--timeout", "0", "hello"]],
    ids=["no-args", "no-message", "unknown-option", "bad-timeout"],
)
async def test_chat_bad_usage_exits_2(args: list[str]) -> None:
    run = await _run_node(str(_CHAT), *args)

    assert run.code == 2
    assert run.stdout == ""
    assert run.stderr.startswith("chat.js: ")
    assert "usage: node chat.js" in run.stderr


# --- lib/agent-client.js ---------------------------------------------------------------------

# Prints one JSON object of what the client saw; errors are reported as their fields.
_CLIENT_SCRIPT = """
import { AgentClient, AgentClientError } from %(module)s;

const client = new AgentClient(process.argv[1], { timeoutMs: 15000 });
const fields = (err) => {
  if (!(err instanceof AgentClientError)) throw err;
  const { code, codeName, reason, domain, metadata, violations } = err;
  return { code, codeName, reason, domain, metadata, violations };
};
const failure = async (promise) => {
  try {
    await promise;
  } catch (err) {
    return fields(err);
  }
  return null;
};
const drain = async (events) => {
  for await (const unused of events) {
  }
};
const out = {};
try {
  out.text = await client.text('hello', { sessionId: 'node-1' });
  const session = await client.getSession('node-1');
  out.session = {
    id: session.session_id,
    agent: session.agent_name,
    status: session.status,
    roles: session.context.map((m) => m.flat.role),
    contents: session.context.map((m) => m.flat.content),
    pending: session.pending_calls.length,
    created: Number(session.create_time.seconds) > 0,
  };
  const page = await client.listSessions({ pageSize: 10 });
  out.listed = page.sessions.map((s) => s.session_id);
  out.interrupted = await client.interrupt('node-1');
  out.missing = await failure(client.getSession('node-404'));
  out.badReply = await failure(drain(client.reply('hello', { sessionId: 'bad id!' })));
  out.badToken = await failure(client.listSessions({ pageToken: 'not-a-token' }));
  out.preAborted = await failure(drain(client.reply('hello', { signal: AbortSignal.abort() })));
  const abort = new AbortController();
  const seen = [];
  out.aborted = await failure(
    (async () => {
      for await (const event of client.reply('hello', { signal: abort.signal })) {
        seen.push(event.type);
        abort.abort();
      }
    })(),
  );
  out.seenBeforeAbort = seen;
  await client.deleteSession('node-1');
  out.deleted = await failure(client.getSession('node-1'));
} finally {
  client.close();
}
process.stdout.write(JSON.stringify(out));
"""


def _what(error: dict[str, Any]) -> tuple[str, str]:
    """An AgentClientError's status name and reason, as the script reported them."""
    return error["codeName"], error["reason"]


async def test_agent_client_text_sessions_errors_and_abort(target: str) -> None:
    module = json.dumps((NODE_DIR / "lib" / "agent-client.js").as_uri())
    script = _CLIENT_SCRIPT % {"module": module}

    run = await _run_node("--input-type=module", "-e", script, target)

    assert run.code == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["text"] == "the answer"
    assert out["session"] == {
        "id": "node-1",
        "agent": "assistant",
        "status": "SESSION_STATUS_IDLE",
        "roles": ["ROLE_USER", "ROLE_ASSISTANT", "ROLE_TOOL", "ROLE_ASSISTANT"],
        "contents": ["hello", "", "hi", "the answer"],
        "pending": 0,
        "created": True,
    }
    assert out["listed"] == ["node-1"]
    assert out["interrupted"] is False
    assert out["missing"] == {
        "code": 5,
        "codeName": "NOT_FOUND",
        "reason": "SESSION_NOT_FOUND",
        "domain": "hookmesh.dev",
        "metadata": {"sessionId": "node-404"},
        "violations": [],
    }
    bad = out["badReply"]
    assert (bad["code"], _what(bad)) == (3, ("INVALID_ARGUMENT", "INVALID_SCHEMA"))
    assert [v["field"] for v in bad["violations"]] == ["session_id"]
    assert bad["metadata"] == {"field": "session_id", "violationCount": "1"}
    assert _what(out["badToken"]) == ("INVALID_ARGUMENT", "INVALID_SCHEMA")
    assert [v["field"] for v in out["badToken"]["violations"]] == ["page_token"]
    for aborted in (out["preAborted"], out["aborted"]):
        assert (aborted["code"], _what(aborted)) == (1, ("CANCELLED", ""))
    assert out["seenBeforeAbort"] == ["reply_start"]
    assert _what(out["deleted"]) == ("NOT_FOUND", "SESSION_NOT_FOUND")


def _without_ids(line: str) -> dict[str, Any]:
    """An event line with the per-run ids (reply, session, block, call) blanked."""
    event = json.loads(line)
    for key in ("reply_id", "session_id", "block_id", "call_id", "response_id", "id"):
        if key in event:
            event[key] = "…"
    return event


async def test_python_and_node_chat_print_the_same_json(target: str) -> None:
    from tests.e2e.commands import run

    node = await _chat(target, "--json", "hello")
    code, out, err = await run("chat", "--target", target, "--json", "hello")
    assert node.code == 0 and code == 0, (node.stderr, err)
    node_events = [_without_ids(line) for line in node.stdout.splitlines()]
    python_events = [_without_ids(line) for line in out.splitlines()]
    types = {e["type"] for e in python_events}
    assert {"tool_call_start", "tool_result_delta", "text_block_delta", "reply_end"} <= types
    assert python_events == node_events
