"""The AG-UI gateway over real HTTP in front of a real agent service: runs, front-end tools,
confirmations, errors, tokens, disconnects, keepalives, CORS, and AG-UI conformance of the
recorded and live streams (ag-ui-validate, every rule)."""

from __future__ import annotations

import asyncio
import base64
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui_validate.pytest_plugin import assert_valid_agui, validate_agui_endpoint

from hookmesh.schema import ImageBlock, InlineSource, Message, tool_results
from hookmesh.services import Authenticator, Service, start_server
from hookmesh.services.agent import SERVICE_NAME
from hookmesh.services.agui import load_agui_config, start_agui_gateway
from hookmesh.v1 import agent_pb2_grpc
from tests.agui_stack import TIMEOUT, Stack, agui_stack, post_run, run_input, sse_events
from tests.service_tools import GateState

pytestmark = pytest.mark.timeout(60)

LOCATE = {
    "name": "get_location",
    "description": "The user's location, from the browser.",
    "parameters": {"type": "object", "properties": {"precision": {"type": "string"}}},
}
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    async with agui_stack(tmp_path) as running:
        yield running


@pytest.fixture
async def http(stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=stack.url, timeout=TIMEOUT) as client:
        yield client


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def text(events: list[dict[str, Any]]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")


def user(message_id: str, content: Any) -> dict[str, Any]:
    return {"id": message_id, "role": "user", "content": content}


# --- runs ----------------------------------------------------------------------------------


async def test_a_text_run_streams_the_answer(http: httpx.AsyncClient) -> None:
    response, events = await post_run(http, run_input("t-text", "r1", [user("u1", "Hi there")]))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert types(events)[:3] == ["RUN_STARTED", "STATE_SNAPSHOT", "STEP_STARTED"]
    assert events[0] == {**events[0], "threadId": "t-text", "runId": "r1"}
    assert text(events) == "Hello! You said: Hi there"
    assert len([e for e in events if e["type"] == "TEXT_MESSAGE_CONTENT"]) > 1  # streamed
    finished = events[-1]
    assert finished["type"] == "RUN_FINISHED"
    assert finished["outcome"] == {"type": "success"}
    assert finished["usage"][0]["model"] == "scripted"
    assert events[1]["snapshot"]["hookmesh"]["sessionId"] == "t-text"
    assert_valid_agui(events, max_warnings=0)


async def test_a_server_tool_streams_reasoning_call_and_result(http: httpx.AsyncClient) -> None:
    _, events = await post_run(http, run_input("t-tool", "r1", [user("u1", "weather?")]))
    kinds = types(events)
    for expected in (
        ["REASONING_START", "REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT"],
        ["TOOL_CALL_START", "TOOL_CALL_ARGS"],
        ["TOOL_CALL_END"],
        ["TOOL_CALL_RESULT"],
    ):
        assert any(kinds[i : i + len(expected)] == expected for i in range(len(kinds)))
    [start] = [e for e in events if e["type"] == "TOOL_CALL_START"]
    [first_text] = [e for e in events if e["type"] == "TEXT_MESSAGE_START"][:1]
    assert start["toolCallName"] == "get_weather"
    assert start["parentMessageId"] == first_text["messageId"]
    args = "".join(e["delta"] for e in events if e["type"] == "TOOL_CALL_ARGS")
    assert args == '{"city": "Oslo"}'
    [result] = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert (result["toolCallId"], result["content"]) == (start["toolCallId"], "-3 °C, snow")
    assert "The tool said: -3 °C, snow" in text(events)
    steps = [e["stepName"] for e in events if e["type"] == "STEP_STARTED"]
    assert steps == ["step 1", "step 2"]
    assert kinds.count("STEP_FINISHED") == 2
    assert_valid_agui(events, max_warnings=0)


async def test_a_front_end_tool_round_trip(http: httpx.AsyncClient, stack: Stack) -> None:
    history = [user("u1", "where am I?")]
    _, first = await post_run(http, run_input("t-fe", "r1", history, tools=[LOCATE]))
    [call] = [e for e in first if e["type"] == "TOOL_CALL_START"]
    assert call["toolCallName"] == "get_location"
    assert first[-1]["outcome"] == {"type": "success", "pendingToolCallIds": [call["toolCallId"]]}
    assert "TOOL_CALL_RESULT" not in types(first)
    assert_valid_agui(first, max_warnings=0)

    history += [
        {
            "id": call["toolCallId"],
            "role": "assistant",
            "toolCalls": [
                {
                    "id": call["toolCallId"],
                    "type": "function",
                    "function": {"name": "get_location", "arguments": '{"precision": "city"}'},
                }
            ],
        },
        {"id": "r-1", "role": "tool", "toolCallId": call["toolCallId"], "content": "Bergen"},
    ]
    _, second = await post_run(http, run_input("t-fe", "r2", history, tools=[LOCATE]))
    assert text(second) == "The tool said: Bergen"
    assert "TOOL_CALL_RESULT" not in types(second)  # the client sent it
    assert second[-1]["outcome"] == {"type": "success"}
    assert_valid_agui(second, max_warnings=0)


async def _interrupted(http: httpx.AsyncClient, thread: str) -> tuple[list[Any], dict[str, Any]]:
    history: list[Any] = [user("u1", "please delete my notes")]
    _, events = await post_run(http, run_input(thread, "r1", history))
    outcome = events[-1]["outcome"]
    assert outcome["type"] == "interrupt"
    [interrupt] = outcome["interrupts"]
    [call] = [e for e in events if e["type"] == "TOOL_CALL_START"]
    assert interrupt["toolCallId"] == call["toolCallId"] == interrupt["id"]
    assert interrupt["reason"] == "tool_call"
    assert interrupt["responseSchema"]["required"] == ["approved"]
    assert_valid_agui(events, max_warnings=0)
    history.append(
        {
            "id": call["toolCallId"],
            "role": "assistant",
            "toolCalls": [
                {
                    "id": call["toolCallId"],
                    "type": "function",
                    "function": {"name": "delete_file", "arguments": '{"path": "notes.txt"}'},
                }
            ],
        }
    )
    return history, interrupt


async def test_approving_a_confirmation_runs_the_tool(http: httpx.AsyncClient) -> None:
    history, interrupt = await _interrupted(http, "t-approve")
    resume = [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}]
    _, events = await post_run(http, run_input("t-approve", "r2", history, resume=resume))
    assert types(events)[:3] == ["RUN_STARTED", "STATE_SNAPSHOT", "MESSAGES_SNAPSHOT"]
    [result] = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert (result["toolCallId"], result["content"]) == (interrupt["id"], "deleted notes.txt")
    assert "TOOL_CALL_START" not in types(events)  # the call belongs to the first run
    assert text(events) == "The tool said: deleted notes.txt"
    assert events[-1]["outcome"] == {"type": "success"}
    assert_valid_agui(events, max_warnings=0)


async def test_approving_with_edited_arguments_runs_the_edited_call(
    http: httpx.AsyncClient,
) -> None:
    history, interrupt = await _interrupted(http, "t-edit")
    edited = {"approved": True, "arguments": {"path": "other.txt"}}
    resume = [{"interruptId": interrupt["id"], "status": "resolved", "payload": edited}]
    _, events = await post_run(http, run_input("t-edit", "r2", history, resume=resume))
    [result] = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert result["content"] == "deleted other.txt"


async def test_an_edit_the_tool_refuses_is_400_and_the_thread_stays_paused(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    history, interrupt = await _interrupted(http, "t-bad-edit")
    bad = {"approved": True, "arguments": {"path": 3}}
    resume = [{"interruptId": interrupt["id"], "status": "resolved", "payload": bad}]
    response, _ = await post_run(http, run_input("t-bad-edit", "r2", history, resume=resume))
    error = response.json()["error"]
    assert (response.status_code, error["reason"]) == (400, "INVALID_SCHEMA")
    assert [v["field"] for v in error["violations"]] == ["confirmations[0].arguments"]
    session = await stack.gateway.client.get_session("t-bad-edit")
    assert session.status == "awaiting_confirmation"


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ({"status": "resolved", "payload": {"approved": False, "reason": "keep it"}}, "keep it"),
        ({"status": "cancelled"}, "cancelled"),
    ],
    ids=["rejected", "cancelled"],
)
async def test_rejecting_a_confirmation_denies_the_call(
    http: httpx.AsyncClient, entry: dict[str, Any], said: str
) -> None:
    history, interrupt = await _interrupted(http, "t-reject")
    resume = [{"interruptId": interrupt["id"], **entry}]
    _, events = await post_run(http, run_input("t-reject", "r2", history, resume=resume))
    [result] = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert result["metadata"] == {"hookmesh": {"state": "denied"}}
    assert said in result["content"]
    assert events[-1]["type"] == "RUN_FINISHED"


REFUSALS = [
    ("new message", None, True, "INTERRUPT_PENDING"),
    ("no resume", None, False, "INTERRUPT_PENDING"),
    ("unknown id", [{"interruptId": "nope", "status": "cancelled"}], False, "UNKNOWN_INTERRUPT"),
    (
        "bad payload",
        [{"status": "resolved", "payload": {"ok": 1}}],
        False,
        "INVALID_RESUME_PAYLOAD",
    ),
]


@pytest.mark.parametrize(
    ("resume", "extra", "code"), [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS]
)
async def test_a_pending_interrupt_refuses_other_input_with_run_error(
    http: httpx.AsyncClient, resume: list[Any] | None, extra: bool, code: str
) -> None:
    history, interrupt = await _interrupted(http, "t-refuse")
    if extra:
        history.append(user("u2", "and another thing"))
    entries = [
        {"interruptId": interrupt["id"], **e} if "interruptId" not in e else e for e in resume or []
    ]
    body = run_input("t-refuse", "r2", history, **({"resume": entries} if resume else {}))
    response, events = await post_run(http, body)
    assert response.status_code == 200
    assert types(events) == ["RUN_STARTED", "STATE_SNAPSHOT", "RUN_ERROR"]
    assert events[-1]["code"] == code
    assert_valid_agui(events, max_warnings=0)
    # The thread still waits for the answer.
    resume_ok = [{"interruptId": interrupt["id"], "status": "cancelled"}]
    history = [m for m in history if m["id"] != "u2"]
    _, after = await post_run(http, run_input("t-refuse", "r3", history, resume=resume_ok))
    assert after[-1]["type"] == "RUN_FINISHED"


async def test_resume_on_a_thread_without_interrupts_is_a_run_error(
    http: httpx.AsyncClient,
) -> None:
    await post_run(http, run_input("t-idle", "r1", [user("u1", "hi")]))
    resume = [{"interruptId": "x", "status": "cancelled"}]
    _, events = await post_run(http, run_input("t-idle", "r2", [user("u1", "hi")], resume=resume))
    assert events[-1] == {**events[-1], "type": "RUN_ERROR", "code": "NO_OPEN_INTERRUPT"}


async def test_a_model_error_is_a_run_error(http: httpx.AsyncClient) -> None:
    _, events = await post_run(http, run_input("t-fail", "r1", [user("u1", "fail please")]))
    assert events[-1]["type"] == "RUN_ERROR"
    assert events[-1]["code"] == "MODEL_ERROR"
    assert "out of order" in events[-1]["message"]
    assert_valid_agui(events, max_warnings=0)


async def test_an_image_reaches_the_agent_as_an_image_block(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    data = base64.b64encode(PNG).decode()
    content = [
        {"type": "text", "text": "What is this?"},
        {"type": "image", "source": {"type": "data", "value": data, "mimeType": "image/png"}},
    ]
    _, events = await post_run(http, run_input("t-image", "r1", [user("u1", content)]))
    assert text(events) == f"I see an image (image/png, {len(PNG)} bytes)."
    session = await stack.gateway.client.get_session("t-image")
    images = [b for b in _blocks(session.context[0]) if b.type == "image"]
    assert images == [ImageBlock(source=InlineSource(data=PNG, mime_type="image/png"))]


def _blocks(message: Message) -> list[Any]:
    return list(message.parts if message.kind == "flat" else message.blocks)


async def test_history_seeds_a_new_thread_and_only_new_messages_follow(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    history = [
        {"id": "s1", "role": "system", "content": "Be brief."},
        user("u1", "first"),
        {"id": "a1", "role": "assistant", "content": "noted"},
        user("u2", "second"),
    ]
    await post_run(http, run_input("t-seed", "r1", history))
    history += [{"id": "a2", "role": "assistant", "content": "ok"}, user("u3", "third")]
    await post_run(http, run_input("t-seed", "r2", history))
    session = await stack.gateway.client.get_session("t-seed")
    users = [m for m in session.context if m.role == "user"]
    assert [getattr(m, "content", "") for m in users] == ["first", "second", "third"]


# --- bad requests --------------------------------------------------------------------------

BAD: list[tuple[str, bytes, int, str, str | None]] = [
    ("not json", b"{", 400, "INVALID_JSON", None),
    ("not an object", b"[]", 400, "INVALID_SCHEMA", "input"),
    ("no thread", b'{"runId": "r", "messages": []}', 400, "INVALID_SCHEMA", "threadId"),
    (
        "bad thread id",
        b'{"threadId": "a b", "runId": "r", "messages": []}',
        400,
        "INVALID_SCHEMA",
        "threadId",
    ),
    (
        "image without mime type",
        b'{"threadId": "t", "runId": "r", "messages": [{"id": "u", "role": "user", "content":'
        b' [{"type": "image", "source": {"type": "data", "value": "aGk="}}]}]}',
        400,
        "INVALID_SCHEMA",
        "messages[0].content[0].source.mimeType",
    ),
    (
        "bad forwarded props",
        b'{"threadId": "t", "runId": "r", "messages": [],'
        b' "forwardedProps": {"hookmesh": {"maxIters": "many"}}}',
        400,
        "INVALID_SCHEMA",
        "forwardedProps.hookmesh.maxIters",
    ),
    (
        "bad tool name",
        b'{"threadId": "t", "runId": "r", "messages": [{"id": "u", "role": "user",'
        b' "content": "hi"}], "tools": [{"name": "get_weather", "description": "x"}]}',
        400,
        "INVALID_CLIENT_TOOLS",
        "client_tools[0].name",
    ),
]


@pytest.mark.parametrize(
    ("body", "status", "reason", "field"), [b[1:] for b in BAD], ids=[b[0] for b in BAD]
)
async def test_bad_requests_get_http_errors_with_details(
    http: httpx.AsyncClient, body: bytes, status: int, reason: str, field: str | None
) -> None:
    response = await http.post("/agui", content=body, headers={"content-type": "application/json"})
    assert response.status_code == status
    error = response.json()["error"]
    assert error["reason"] == reason
    if field is not None:
        assert error["violations"][0]["field"] == field
    assert (await http.get("/healthz")).status_code == 200


async def test_a_large_body_is_413(tmp_path: Path) -> None:
    big = run_input("t", "r", [user("u", "x" * 4096)])
    async with (
        agui_stack(tmp_path, max_request_bytes=2048) as stack,
        httpx.AsyncClient(base_url=stack.url) as http,
    ):
        response = await http.post("/agui", json=big, timeout=TIMEOUT)
    assert response.status_code == 413
    assert response.json()["error"]["reason"] == "REQUEST_TOO_LARGE"


async def test_only_bearer_tokens_pass(http: httpx.AsyncClient) -> None:
    body = run_input("t-auth", "r1", [user("u1", "hi")])
    response, _ = await post_run(http, body, authorization="Basic dXNlcjpwdw==")
    assert response.status_code == 401
    assert response.json()["error"]["reason"] == "UNAUTHENTICATED"


async def test_the_bearer_token_is_passed_to_the_agent(stack: Stack) -> None:
    guarded = await start_server(
        [
            Service(
                SERVICE_NAME,
                stack.agent.servicer,
                agent_pb2_grpc.add_AgentServiceServicer_to_server,
            )
        ],
        "127.0.0.1:0",
        authenticator=Authenticator({"s3cret": "web-user"}),
    )
    config = load_agui_config(None, agent=f"127.0.0.1:{guarded.port}")
    gateway = await start_agui_gateway(config, address="127.0.0.1:0")
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gateway.port}") as http:
            body = run_input("t-token", "r1", [user("u1", "hi")])
            missing, _ = await post_run(http, body)
            wrong, _ = await post_run(http, body, authorization="Bearer nope")
            right, events = await post_run(http, body, authorization="Bearer s3cret")
    finally:
        await gateway.stop(0.5)
        await guarded.stop(None)
    assert (missing.status_code, wrong.status_code) == (401, 401)
    assert "s3cret" not in wrong.text
    assert right.status_code == 200 and text(events) == "Hello! You said: hi"


async def test_an_unreachable_agent_is_503_in_words_a_page_can_show(tmp_path: Path) -> None:
    config = load_agui_config(None, agent="127.0.0.1:9", run_timeout=5)
    gateway = await start_agui_gateway(config, address="127.0.0.1:0")
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gateway.port}") as http:
            response, _ = await post_run(http, run_input("t", "r", [user("u", "hi")]))
            listing = await http.get("/agui/threads")
    finally:
        await gateway.stop(0.5)
    down = {
        "error": {
            "code": 503,
            "reason": "AGENT_UNAVAILABLE",
            "message": "the agent service at 127.0.0.1:9 does not answer: is it up?",
        }
    }
    assert (response.status_code, response.json()) == (503, down)
    assert (listing.status_code, listing.json()) == (503, down)


# --- the stream's life ---------------------------------------------------------------------


async def test_leaving_the_stream_leaves_the_reply_running(tmp_path: Path) -> None:
    """A page that goes away (closed, reloaded) does not stop its run: the reply goes on and
    ends on its own; only an explicit stop (Interrupt) ends it early."""
    GateState.reset()
    async with agui_stack(tmp_path) as stack:
        body = run_input("t-gone", "r1", [user("u1", "open the gate")])
        async with (
            httpx.AsyncClient(base_url=stack.url, timeout=TIMEOUT) as http,
            http.stream("POST", "/agui", json=body) as response,
        ):
            async with asyncio.timeout(TIMEOUT):
                await GateState.started.wait()
        running = await stack.gateway.client.get_session("t-gone")
        GateState.release.set()
        await stack.agent.servicer.drain(TIMEOUT)
        session = await stack.gateway.client.get_session("t-gone")
    assert response.status_code == 200
    assert running.status == "running"
    assert session.status == "idle"
    states = [r.state for m in session.context for r in tool_results(m)]
    assert states == ["success"]


async def test_a_silent_agent_gets_keepalive_comments(tmp_path: Path) -> None:
    GateState.reset()
    async with agui_stack(tmp_path, keepalive_seconds=0.05) as stack:
        body = run_input("t-ka", "r1", [user("u1", "open the gate")])
        chunks: list[str] = []
        async with (
            httpx.AsyncClient(base_url=stack.url, timeout=TIMEOUT) as http,
            http.stream("POST", "/agui", json=body) as response,
        ):
            async with asyncio.timeout(TIMEOUT):
                async for chunk in response.aiter_text():
                    chunks.append(chunk)
                    if ": keepalive" in chunk:
                        GateState.release.set()
    events = sse_events("".join(chunks))
    assert events[-1]["type"] == "RUN_FINISHED"
    assert [e["content"] for e in events if e["type"] == "TOOL_CALL_RESULT"] == ["released"]


# --- HTTP surface --------------------------------------------------------------------------


async def test_page_and_health(http: httpx.AsyncClient, stack: Stack) -> None:
    page = await http.get("/")
    assert page.status_code == 200 and "<title>hookmesh" in page.text
    assert (await http.get("/healthz")).json() == {"status": "serving"}
    assert (await http.get("/agui")).status_code == 405


async def test_cors_is_off_unless_configured(tmp_path: Path, http: httpx.AsyncClient) -> None:
    preflight = {
        "origin": "https://app.test",
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization, content-type",
    }
    closed = await http.options("/agui", headers=preflight)
    assert "access-control-allow-origin" not in closed.headers
    async with (
        agui_stack(tmp_path / "cors", cors_origins=["https://app.test"]) as stack,
        httpx.AsyncClient(base_url=stack.url) as client,
    ):
        opened = await client.options("/agui", headers=preflight)
        other = await client.options("/agui", headers={**preflight, "origin": "https://x.test"})
    assert opened.status_code == 200
    assert opened.headers["access-control-allow-origin"] == "https://app.test"
    assert "access-control-allow-origin" not in other.headers


# --- conformance: live endpoint and recorded captures -------------------------------------


async def test_the_live_endpoint_passes_ag_ui_validate(stack: Stack) -> None:
    report = await validate_agui_endpoint(
        f"{stack.url}/agui",
        input=run_input("t-live", "r1", [user("u1", "weather?")]),
        timeout_ms=int(TIMEOUT * 1000),
        features=["shared-state"],
    )
    assert [(d.rule, d.severity, d.message) for d in report.diagnostics] == []
    assert report.skipped == []  # every rule of the catalogue ran


async def test_recorded_streams_pass_the_ag_ui_validate_cli(
    http: httpx.AsyncClient, tmp_path: Path
) -> None:
    captures = []
    for i, question in enumerate(["hello", "weather?", "delete it", "fail"]):
        response = await http.post(
            "/agui", json=run_input(f"t-rec{i}", "r1", [user("u1", question)])
        )
        path = tmp_path / f"run{i}.sse"
        path.write_text(response.text)
        captures.append(path)
    cli = Path(sys.executable).with_name("ag-ui-validate")
    for path in captures:
        process = await asyncio.create_subprocess_exec(
            str(cli),
            str(path),
            "--fail-on",
            "warning",
            "--no-color",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        async with asyncio.timeout(TIMEOUT):
            output, _ = await process.communicate()
        assert process.returncode == 0, f"{path.name}: {output.decode()}"
