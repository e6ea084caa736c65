"""The chat page's thread routes over real HTTP in front of a real agent service: a thread's
history from its session, what a paused one waits for, following a running reply (a valid
AG-UI stream of the rest), stopping it, the caller's list, and their errors."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from hookmesh.services.agui import confirmation_interrupt
from tests.agui_stack import TIMEOUT, Stack, agui_stack, post_run, run_input, sse_events
from tests.service_tools import GateState

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    GateState.reset()
    async with agui_stack(tmp_path) as running:
        try:
            yield running
        finally:
            GateState.release.set()


@pytest.fixture
async def http(stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=stack.url, timeout=TIMEOUT) as client:
        yield client


def user(message_id: str, content: str) -> dict[str, Any]:
    return {"id": message_id, "role": "user", "content": content}


async def test_a_threads_history_comes_from_its_session(http: httpx.AsyncClient) -> None:
    await post_run(http, run_input("t-weather", "r1", [user("u1", "weather?")]))
    thread = (await http.get("/agui/threads/t-weather")).json()
    assert (thread["threadId"], thread["status"]) == ("t-weather", "idle")
    assert thread["interrupts"] == [] and thread["pendingToolCallIds"] == []
    messages = thread["messages"]
    assert [m["role"] for m in messages] == ["user", "reasoning", "assistant", "tool", "assistant"]
    assert messages[0] == user("u1", "weather?")
    [call] = messages[2]["toolCalls"]
    assert call["function"] == {"name": "get_weather", "arguments": '{"city": "Oslo"}'}
    assert (messages[3]["toolCallId"], messages[3]["content"]) == (call["id"], "-3 °C, snow")
    assert messages[4]["content"] == "The tool said: -3 °C, snow"
    assert thread["updateTime"].endswith("+00:00") and thread["lastSeq"] > 0


async def test_a_paused_thread_says_what_it_waits_for_and_a_denial_is_kept(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    await post_run(http, run_input("t-ask", "r1", [user("u1", "delete it")]))
    thread = (await http.get("/agui/threads/t-ask")).json()
    assert thread["status"] == "awaiting_confirmation"
    session = await stack.gateway.client.get_session("t-ask")
    [call] = session.pending_calls
    expected = confirmation_interrupt(call).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    assert thread["interrupts"] == [expected]
    no = {"approved": False, "reason": "keep it"}
    resume = [{"interruptId": call.id, "status": "resolved", "payload": no}]
    await post_run(http, run_input("t-ask", "r2", thread["messages"], resume=resume))
    after = (await http.get("/agui/threads/t-ask")).json()
    [denied] = [m for m in after["messages"] if m["role"] == "tool"]
    assert denied["metadata"] == {"hookmesh": {"state": "denied"}}


async def _gated(http: httpx.AsyncClient, thread_id: str) -> None:
    """Start a run that waits at the gate, then leave its stream (a page reloaded)."""
    body = run_input(thread_id, "r1", [user("u1", "open the gate")])
    async with http.stream("POST", "/agui", json=body) as response:
        assert response.status_code == 200
        async with asyncio.timeout(TIMEOUT):
            await GateState.started.wait()


async def test_following_a_running_reply_streams_the_rest_as_valid_ag_ui(
    http: httpx.AsyncClient, tmp_path: Path
) -> None:
    await _gated(http, "t-follow")
    thread = (await http.get("/agui/threads/t-follow")).json()
    assert thread["status"] == "running"
    assert [m["role"] for m in thread["messages"]] == ["user", "assistant"]  # the call, no result
    path = f"/agui/threads/t-follow/reply?afterSeq={thread['lastSeq']}&runId=again"
    async with http.stream("GET", path) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        GateState.release.set()
        body = "".join([chunk async for chunk in response.aiter_text()])
    events = sse_events(body)
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["RUN_STARTED", "STATE_SNAPSHOT"] and kinds[-1] == "RUN_FINISHED"
    assert events[0]["runId"] == events[-1]["runId"] == "again"
    assert "TOOL_CALL_START" not in kinds  # the history has the call
    [result] = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert result["content"] == "released"
    said = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert said == "The tool said: released"
    capture = tmp_path / "follow.sse"
    capture.write_text(body)
    cli = Path(sys.executable).with_name("ag-ui-validate")
    process = await asyncio.create_subprocess_exec(
        str(cli), str(capture), "--fail-on", "warning", "--no-color",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    async with asyncio.timeout(TIMEOUT):
        output, _ = await process.communicate()
    assert process.returncode == 0, output.decode()
    whole = sse_events((await http.get("/agui/threads/t-follow/reply?afterSeq=0")).text)
    assert [e["type"] for e in whole].count("TOOL_CALL_START") == 1  # from the start: all


async def test_stop_interrupts_the_running_reply(http: httpx.AsyncClient) -> None:
    await _gated(http, "t-stop")
    stop = await http.post("/agui/threads/t-stop/interrupt", json={})
    assert stop.json() == {"interrupted": True}
    events = sse_events((await http.get("/agui/threads/t-stop/reply?afterSeq=0")).text)
    assert events[-1]["outcome"] == {"type": "cancelled"}
    again = await http.post("/agui/threads/t-stop/interrupt", json={})
    assert again.json() == {"interrupted": False}


async def test_the_list_holds_the_callers_threads_and_errors_have_reasons(
    http: httpx.AsyncClient,
) -> None:
    for thread_id in ("t-a", "t-b"):
        await post_run(http, run_input(thread_id, "r1", [user("u1", "hello")]))
    listing = (await http.get("/agui/threads")).json()
    assert [t["threadId"] for t in listing["threads"]] == ["t-b", "t-a"]  # latest first
    assert {t["status"] for t in listing["threads"]} == {"idle"}
    assert listing["nextPageToken"] == ""

    async def error(method: str, path: str) -> tuple[int, str]:
        body = {} if method == "POST" else None  # a POST is JSON (the doors' CSRF guard)
        response = await http.request(method, path, json=body)
        return response.status_code, response.json()["error"]["reason"]

    assert await error("GET", "/agui/threads/nobody") == (404, "SESSION_NOT_FOUND")
    assert await error("GET", "/agui/threads/bad%20id") == (400, "INVALID_SCHEMA")
    assert await error("GET", "/agui/threads/t-a/reply?afterSeq=x") == (400, "INVALID_SCHEMA")
    assert await error("GET", "/agui/threads/nobody/reply") == (404, "SESSION_NOT_FOUND")
    assert await error("POST", "/agui/threads/nobody/interrupt") == (404, "SESSION_NOT_FOUND")
