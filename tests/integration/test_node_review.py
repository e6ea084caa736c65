"""The edit decision through Node: lib/agent-client.js resumes with edited arguments, and
chat.js asks approve / edit / reject, against a live agent service."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from hookmesh.client import AgentClient
from hookmesh.schema import EDITED_CALLS_METADATA_KEY, tool_calls, tool_results
from tests.integration.test_node_client import _CHAT, _run_node
from tests.node_process import NODE_DIR, node_binary
from tests.service_tools import confirming_service

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def target(tmp_path: Path) -> AsyncIterator[str]:
    """A live agent service whose model asks to delete a file, then answers."""
    node_binary()
    async with confirming_service(tmp_path) as address:
        yield address


_SCRIPT = """
import { AgentClient, AgentClientError } from %(module)s;

const client = new AgentClient(process.argv[1], { timeoutMs: 15000 });
const out = {};
const results = async (events) => {
  const seen = [];
  for await (const event of events) {
    if (event.type === 'tool_result_delta') seen.push(event.text);
    if (event.type === 'require_user_confirm') out.callId = event.tool_calls[0].id;
    if (event.type === 'reply_end') seen.push(event.finish_reason);
  }
  return seen;
};
try {
  out.paused = await results(client.reply('clean up', { sessionId: 'n1' }));
  const edit = (args) => ({
    confirmations: [{ callId: out.callId, confirmed: true, arguments: args }],
  });
  try {
    await results(client.resume('n1', edit({ path: 1 })));
  } catch (err) {
    if (!(err instanceof AgentClientError)) throw err;
    out.refused = { codeName: err.codeName, reason: err.reason, field: err.violations[0].field };
  }
  out.resumed = await results(client.resume('n1', edit({ path: '/tmp/y' })));
} finally {
  client.close();
}
process.stdout.write(JSON.stringify(out));
"""


async def test_agent_client_resumes_with_edited_arguments(target: str) -> None:
    module = json.dumps((NODE_DIR / "lib" / "agent-client.js").as_uri())
    run = await _run_node("--input-type=module", "-e", _SCRIPT % {"module": module}, target)
    code, out, err = run.code, run.stdout, run.stderr
    assert code == 0, err
    seen = json.loads(out)
    assert seen["paused"] == ["FINISH_REASON_AWAITING_CONFIRMATION"]
    assert seen["refused"] == {
        "codeName": "INVALID_ARGUMENT",
        "reason": "INVALID_SCHEMA",
        "field": "confirmations[0].arguments",
    }
    assert seen["resumed"] == ["deleted /tmp/y", "FINISH_REASON_COMPLETED"]
    async with AgentClient(target, timeout=10) as client:
        session = await client.get_session("n1")
    asked = next(m for m in session.context if tool_calls(m))
    assert json.loads(tool_calls(asked)[0].arguments) == {"path": "/tmp/y"}
    original = (asked.metadata or {})[EDITED_CALLS_METADATA_KEY][seen["callId"]]
    assert json.loads(original) == {"path": "/tmp/x"}


async def test_chat_js_asks_and_edits(target: str) -> None:
    answers = 'e\nnot json\nmaybe\ne\n{"path": "/tmp/z"}\n'
    run = await _run_node(
        str(_CHAT),
        "--target",
        target,
        "--timeout",
        "15",
        "--session",
        "n2",
        "--new-session",
        "go",
        stdin=answers,
    )
    code, out, err = run.code, run.stdout, run.stderr
    assert code == 0, err
    assert "? confirm delete_file" in out
    assert "refused: confirmations[0].arguments: " in err and "[INVALID_SCHEMA]" in err
    assert "type a, e or r" in err
    assert "← delete_file success: deleted /tmp/z" in out
    assert out.splitlines()[-1] == "end: completed"
    async with AgentClient(target, timeout=10) as client:
        session = await client.get_session("n2")
    assert [r.text for m in session.context for r in tool_results(m)] == ["deleted /tmp/z"]


async def test_chat_js_rejects_with_a_reason(target: str) -> None:
    run = await _run_node(
        str(_CHAT), "--target", target, "--timeout", "15", "go", stdin="r\nkeep it\n"
    )
    code, out, err = run.code, run.stdout, run.stderr
    assert code == 0, err
    assert "← delete_file denied: The user denied this call: keep it" in out
