"""OpenAIChatModel against a local HTTP/1.1 server replaying OpenAI wire-format answers."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from hookmesh.models import ModelChunk, ModelError, ModelResponse, OutputFormat
from hookmesh.models._openai import OpenAIChatModel
from hookmesh.schema import (
    AgenticMessage,
    DocumentBlock,
    FlatMessage,
    ImageBlock,
    InlineSource,
    ReasoningBlock,
    TextBlock,
    ToolCall,
    ToolCallBlock,
    ToolResultBlock,
    Usage,
    make_assistant,
    make_user_text,
    reasoning_of,
    text_of,
    tool_calls,
)

SHORT_TIMEOUT = 5.0
API_KEY = "sk-test-secret-0123456789"
PNG = b"\x89PNG\r\n\x1a\nfake"
PNG_URL = "data:image/png;base64," + base64.b64encode(PNG).decode()
WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Current weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
TIME_TOOL = {"name": "get_time", "description": "Current time in a timezone."}

# --- Answers in the exact wire format of the OpenAI Chat Completions API. ---

TEXT_ANSWER = {
    "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
    "object": "chat.completion",
    "created": 1741569952,
    "model": "gpt-4.1-2025-04-14",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "Hello! How can I assist you today?",
                "refusal": None,
                "annotations": [],
            },
            "logprobs": None,
            "finish_reason": "stop",
        }
    ],
    "usage": {
        "prompt_tokens": 19,
        "completion_tokens": 10,
        "total_tokens": 29,
        "prompt_tokens_details": {"cached_tokens": 7, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 3,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    },
    "service_tier": "default",
    "system_fingerprint": "fp_50cad350e4",
}

TOOL_CALLS_ANSWER = {
    "id": "chatcmpl-abc123",
    "object": "chat.completion",
    "created": 1699896916,
    "model": "gpt-4o-mini",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_abc123",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{\n"city": "Boston"\n}'},
                    },
                    {
                        "id": "call_def456",
                        "type": "function",
                        "function": {"name": "get_time", "arguments": '{"tz": "EST"}'},
                    },
                ],
                "refusal": None,
            },
            "logprobs": None,
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {"prompt_tokens": 82, "completion_tokens": 17, "total_tokens": 99},
}

REASONING_ANSWER = {
    "id": "0b4a3d2e-reasoner",
    "object": "chat.completion",
    "created": 1737000000,
    "model": "deepseek-reasoner",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "9.11 is smaller.",
                "reasoning_content": "Compare 9.11 and 9.9: 0.11 < 0.9.",
            },
            "logprobs": None,
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 12, "completion_tokens": 40, "total_tokens": 52},
}


def _chunk(delta: dict[str, Any], finish: str | None = None, cid: str = "chatcmpl-123") -> dict:
    return {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": 1694268190,
        "model": "gpt-4o-mini",
        "system_fingerprint": "fp_44709d6fcb",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        "usage": None,
    }


def _usage_chunk(prompt: int, completion: int, cid: str = "chatcmpl-123") -> dict:
    return {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": 1694268190,
        "model": "gpt-4o-mini",
        "system_fingerprint": "fp_44709d6fcb",
        "choices": [],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
        },
    }


def _sse(*events: dict) -> list[bytes]:
    """Events as SSE frames, one frame per write, then the [DONE] sentinel."""
    frames = [f"data: {json.dumps(e, separators=(',', ':'))}\n\n".encode() for e in events]
    return [*frames, b"data: [DONE]\n\n"]


STREAMED_TEXT = _sse(
    _chunk({"role": "assistant", "content": "", "refusal": None}),
    _chunk({"content": "Hello"}),
    _chunk({"content": "! How"}),
    _chunk({"content": " can I help?"}),
    _chunk({}, "stop"),
    _usage_chunk(9, 5),
)

STREAMED_TOOL_CALLS = _sse(
    _chunk(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_w",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": ""},
                }
            ],
            "refusal": None,
        }
    ),
    _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"ci'}}]}),
    _chunk(
        {
            "tool_calls": [
                {
                    "index": 1,
                    "id": "call_t",
                    "type": "function",
                    "function": {"name": "get_time", "arguments": '{"tz"'},
                }
            ]
        }
    ),
    _chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'ty": "Par'}}]}),
    _chunk({"tool_calls": [{"index": 1, "function": {"arguments": ': "CET"}'}}]}),
    _chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'is"}'}}]}),
    _chunk({}, "tool_calls"),
    _usage_chunk(80, 30),
)

STREAMED_REASONING = _sse(
    _chunk({"role": "assistant", "content": None, "reasoning_content": ""}, cid="r-1"),
    _chunk({"content": None, "reasoning_content": "Compare "}, cid="r-1"),
    _chunk({"content": None, "reasoning_content": "the decimals."}, cid="r-1"),
    _chunk({"content": "9.11", "reasoning_content": None}, cid="r-1"),
    _chunk({"content": " is smaller.", "reasoning_content": None}, cid="r-1"),
    _chunk({}, "stop", cid="r-1"),
    _usage_chunk(12, 40, cid="r-1"),
)

# --- A real HTTP/1.1 server on 127.0.0.1 that replays queued answers. ---


@dataclass
class Reply:
    """One scripted HTTP answer; `frames` are written (chunked) one by one, `delay` apart.

    With `gate`, the server stops after `gate_after` frames until the test sets it.
    """

    status: int = 200
    frames: list[bytes] = field(default_factory=list)
    content_type: str = "application/json"
    delay: float = 0.0
    gate: asyncio.Event | None = None
    gate_after: int = 0

    @classmethod
    def json(cls, body: dict, status: int = 200) -> Reply:
        return cls(status, [json.dumps(body).encode()])

    @classmethod
    def sse(cls, frames: list[bytes], delay: float = 0.0) -> Reply:
        return cls(200, frames, "text/event-stream", delay)


@dataclass
class Received:
    """One request the server read."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 500: "Internal Server Error"}


class ReplayServer:
    """Reads HTTP/1.1 requests (keep-alive) and answers each with the next queued `Reply`."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.requests: list[Received] = []
        self.closed_early = asyncio.Event()
        """Set when a client hung up before the whole reply was written."""
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task] = set()
        self.port = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            while await self._one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            self.closed_early.set()
        finally:
            self._handlers.discard(task)
            writer.close()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        request_line = await reader.readline()
        if not request_line:
            return False
        method, path, _ = request_line.decode().split(" ", 2)
        headers: dict[str, str] = {}
        while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
            name, _, value = line.decode().partition(":")
            headers[name.strip().lower()] = value.strip()
        raw = await reader.readexactly(int(headers.get("content-length", "0")))
        self.requests.append(Received(method, path, headers, json.loads(raw) if raw else {}))
        reply = self.replies.pop(0)
        head = (
            f"HTTP/1.1 {reply.status} {_REASONS.get(reply.status, 'Status')}\r\n"
            f"Content-Type: {reply.content_type}\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        writer.write(head.encode())
        for sent, frame in enumerate(reply.frames):
            if reply.gate is not None and sent == reply.gate_after:
                await reply.gate.wait()
            if reader.at_eof():
                raise ConnectionResetError("client hung up")
            writer.write(b"%x\r\n%s\r\n" % (len(frame), frame))
            await writer.drain()
            if reply.delay:
                await asyncio.sleep(reply.delay)
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True


@pytest.fixture
async def server() -> AsyncIterator[ReplayServer]:
    srv = ReplayServer()
    await srv.start()
    try:
        yield srv
    finally:
        await srv.stop()


@pytest.fixture
async def model(server: ReplayServer) -> AsyncIterator[OpenAIChatModel]:
    async with OpenAIChatModel(
        f"http://127.0.0.1:{server.port}/v1",
        "gpt-test",
        api_key=API_KEY,
        stream=False,
        timeout=SHORT_TIMEOUT,
    ) as m:
        yield m


async def _call(model: OpenAIChatModel, *args: Any, **kwargs: Any) -> Any:
    async with asyncio.timeout(SHORT_TIMEOUT):
        return await model(*args, **kwargs)


async def _collect(model: OpenAIChatModel, *args: Any, **kwargs: Any) -> list[ModelChunk]:
    async with asyncio.timeout(SHORT_TIMEOUT):
        stream = await model(*args, **kwargs)
        return [chunk async for chunk in stream]


def _user(text: str) -> list[FlatMessage]:
    return [FlatMessage(role="user", content=text)]


# --- Non-streamed answers. ---


@pytest.mark.parametrize("kind", ["flat", "agentic"])
async def test_text_answer_with_usage(model, server, kind):
    server.replies.append(Reply.json(TEXT_ANSWER))

    response = await _call(model, _user("hi"), kind=kind)

    assert isinstance(response, ModelResponse)
    assert response.message.kind == kind
    assert response.message.role == "assistant"
    assert text_of(response.message) == "Hello! How can I assist you today?"
    assert response.usage == Usage(
        input_tokens=19, output_tokens=10, cache_read_tokens=7, reasoning_tokens=3
    )
    assert response.stop_reason == "stop"
    assert response.response_id == "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT"
    request = server.requests[0]
    assert (request.method, request.path) == ("POST", "/v1/chat/completions")
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    assert request.body == {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize("kind", ["flat", "agentic"])
async def test_tool_calls_answer(model, server, kind):
    server.replies.append(Reply.json(TOOL_CALLS_ANSWER))

    response = await _call(model, _user("weather?"), tools=[WEATHER_TOOL, TIME_TOOL], kind=kind)

    assert response.message.kind == kind
    assert tool_calls(response.message) == [
        ToolCall(id="call_abc123", name="get_weather", arguments='{\n"city": "Boston"\n}'),
        ToolCall(id="call_def456", name="get_time", arguments='{"tz": "EST"}'),
    ]
    assert text_of(response.message) == ""
    assert response.stop_reason == "tool_calls"
    assert response.usage == Usage(input_tokens=82, output_tokens=17)


@pytest.mark.parametrize("kind", ["flat", "agentic"])
async def test_reasoning_content_answer(model, server, kind):
    server.replies.append(Reply.json(REASONING_ANSWER))

    response = await _call(model, _user("which is smaller?"), kind=kind)

    assert reasoning_of(response.message) == "Compare 9.11 and 9.9: 0.11 < 0.9."
    assert text_of(response.message) == "9.11 is smaller."
    if kind == "agentic":
        assert [b.type for b in response.message.blocks] == ["reasoning", "text"]


async def test_connection_is_reused_across_calls(model, server):
    server.replies.extend([Reply.json(TEXT_ANSWER), Reply.json(TEXT_ANSWER)])

    await _call(model, _user("one"))
    await _call(model, _user("two"))

    assert [r.body["messages"][0]["content"] for r in server.requests] == ["one", "two"]


# --- Streamed answers. ---


@pytest.fixture
def streaming(model: OpenAIChatModel) -> OpenAIChatModel:
    model.stream = True
    return model


async def test_streamed_text_with_final_usage(streaming, server):
    server.replies.append(Reply.sse(STREAMED_TEXT))

    chunks = await _collect(streaming, _user("hi"))

    assert [c.text for c in chunks if c.text] == ["Hello", "! How", " can I help?"]
    final = chunks[-1]
    assert final.usage == Usage(input_tokens=9, output_tokens=5)
    assert (final.stop_reason, final.response_id) == ("stop", "chatcmpl-123")
    assert all(c.usage is None and not c.stop_reason for c in chunks[:-1])
    request = server.requests[0]
    assert request.body["stream"] is True
    assert request.body["stream_options"] == {"include_usage": True}
    assert request.headers["accept"] == "text/event-stream"


async def test_streamed_tool_calls_assembled_by_index(streaming, server):
    server.replies.append(Reply.sse(STREAMED_TOOL_CALLS))

    chunks = await _collect(streaming, _user("weather and time?"), tools=[WEATHER_TOOL, TIME_TOOL])

    deltas = [
        (c.tool_call.call_id, c.tool_call.name, c.tool_call.arguments)
        for c in chunks
        if c.tool_call
    ]
    assert deltas == [
        ("call_w", "get_weather", ""),
        ("call_w", "", '{"ci'),
        ("call_t", "get_time", '{"tz"'),
        ("call_w", "", 'ty": "Par'),
        ("call_t", "", ': "CET"}'),
        ("call_w", "", 'is"}'),
    ]
    arguments: dict[str, str] = {}
    for call_id, _, fragment in deltas:
        arguments[call_id] = arguments.get(call_id, "") + fragment
    assert json.loads(arguments["call_w"]) == {"city": "Paris"}
    assert json.loads(arguments["call_t"]) == {"tz": "CET"}
    assert chunks[-1].stop_reason == "tool_calls"
    assert chunks[-1].usage == Usage(input_tokens=80, output_tokens=30)


async def test_streamed_tool_call_without_id_gets_a_stable_one(streaming, server):
    # llama.cpp style: every fragment repeats the name; this server sends no ids at all.
    frames = _sse(
        _chunk(
            {"tool_calls": [{"index": 0, "function": {"name": "get_weather", "arguments": "{"}}]}
        ),
        _chunk(
            {"tool_calls": [{"index": 0, "function": {"name": "get_weather", "arguments": "}"}}]}
        ),
        _chunk(
            {"tool_calls": [{"index": 0, "function": {"name": "get_weather", "arguments": ""}}]}
        ),
        _chunk({}, "tool_calls"),
    )
    server.replies.append(Reply.sse(frames))

    chunks = await _collect(streaming, _user("weather?"), tools=[WEATHER_TOOL])

    deltas = [c.tool_call for c in chunks if c.tool_call]
    assert [(d.call_id, d.name, d.arguments) for d in deltas] == [
        ("call_0", "get_weather", "{"),
        ("call_0", "", "}"),
    ]
    assert chunks[-1].usage is None
    assert chunks[-1].stop_reason == "tool_calls"


async def test_streamed_reasoning_content(streaming, server):
    server.replies.append(Reply.sse(STREAMED_REASONING))

    chunks = await _collect(streaming, _user("which is smaller?"))

    assert [c.reasoning for c in chunks if c.reasoning] == ["Compare ", "the decimals."]
    assert [c.text for c in chunks if c.text] == ["9.11", " is smaller."]
    first_text = next(i for i, c in enumerate(chunks) if c.text)
    assert all(not c.reasoning for c in chunks[first_text:])
    assert chunks[-1].response_id == "r-1"


async def test_stream_yields_chunks_as_bytes_arrive(streaming, server):
    # The server sends two frames (role, then "Hello") and holds the rest until the first
    # text chunk has reached the test: a model that waited for the whole body would never
    # yield it (the deadline fails the test).
    rest = asyncio.Event()
    server.replies.append(Reply(200, STREAMED_TEXT, "text/event-stream", gate=rest, gate_after=2))

    async with asyncio.timeout(SHORT_TIMEOUT):
        stream = await streaming(_user("hi"))
        texts: list[str] = []
        async for chunk in stream:
            if chunk.text:
                texts.append(chunk.text)
                if not rest.is_set():
                    assert texts == ["Hello"]
                    rest.set()
        assert texts == ["Hello", "! How", " can I help?"]


async def test_stopping_early_closes_the_connection(streaming, server):
    frames = [f"data: {json.dumps(_chunk({'content': 'x'}))}\n\n".encode()] * 50
    server.replies.append(Reply.sse(frames, delay=0.05))

    async with asyncio.timeout(SHORT_TIMEOUT):
        stream = await streaming(_user("hi"))
        async for _ in stream:
            break
        await stream.aclose()
        await server.closed_early.wait()


async def test_closing_an_unstarted_stream_closes_the_connection(streaming, server):
    frames = [f"data: {json.dumps(_chunk({'content': 'x'}))}\n\n".encode()] * 50
    server.replies.append(Reply.sse(frames, delay=0.05))

    async with asyncio.timeout(SHORT_TIMEOUT):
        stream = await streaming(_user("hi"))
        await stream.aclose()
        await server.closed_early.wait()


# --- Errors. ---


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (
            400,
            {
                "message": "Invalid value for 'tool_choice': no function named 'nope'.",
                "type": "invalid_request_error",
                "param": "tool_choice",
                "code": None,
            },
        ),
        (
            401,
            {
                "message": f"Incorrect API key provided: {API_KEY}.",
                "type": "invalid_request_error",
                "param": None,
                "code": "invalid_api_key",
            },
        ),
        (
            500,
            {
                "message": "The server had an error while processing your request.",
                "type": "server_error",
                "param": None,
                "code": None,
            },
        ),
    ],
)
@pytest.mark.parametrize("stream", [False, True])
async def test_http_error_raises_model_error(model, server, status, error, stream):
    model.stream = stream
    server.replies.append(Reply.json({"error": error}, status=status))

    with pytest.raises(ModelError) as caught:
        await _call(model, _user("hi"))

    exc = caught.value
    assert exc.reason == "MODEL_ERROR"
    assert exc.status == status
    assert exc.metadata["httpStatus"] == str(status)
    assert f"HTTP {status}" in str(exc)
    assert json.loads(exc.body)["error"]["type"] == error["type"]
    assert error["message"].split(":")[0] in str(exc)
    assert API_KEY not in str(exc)
    assert API_KEY not in exc.body


async def test_malformed_sse_line_raises_model_error(streaming, server):
    frames = [*STREAMED_TEXT[:2], b"data: {not json\n\n", *STREAMED_TEXT[2:]]
    server.replies.append(Reply.sse(frames))

    chunks: list[ModelChunk] = []
    with pytest.raises(ModelError, match="malformed JSON") as caught:
        async with asyncio.timeout(SHORT_TIMEOUT):
            async for chunk in await streaming(_user("hi")):
                chunks.append(chunk)

    assert caught.value.reason == "MODEL_ERROR"
    assert caught.value.body == "{not json"
    assert [c.text for c in chunks] == ["Hello"]


async def test_error_event_in_stream_raises_model_error(streaming, server):
    error = {"error": {"message": "The model is overloaded.", "type": "server_error"}}
    frames = [*STREAMED_TEXT[:2], f"data: {json.dumps(error)}\n\n".encode()]
    server.replies.append(Reply.sse(frames))

    with pytest.raises(ModelError, match="overloaded"):
        await _collect(streaming, _user("hi"))


async def test_stream_cut_short_raises_model_error(streaming, server):
    server.replies.append(Reply.sse(STREAMED_TEXT[:3]))

    with pytest.raises(ModelError, match="ended before the model finished"):
        await _collect(streaming, _user("hi"))


@pytest.mark.parametrize("stream", [False, True])
async def test_an_answer_over_the_byte_limit_is_refused(server, stream):
    """Bytes are counted, not characters: 2,000 'é' are 4,000 bytes of UTF-8."""
    text = "é" * 2000
    answer = json.dumps(
        {**TEXT_ANSWER, "choices": [{**TEXT_ANSWER["choices"][0], "message": {"content": text}}]},
        ensure_ascii=False,
    ).encode()
    chunk = _chunk({"content": text})
    frames = [f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode(), b"data: [DONE]\n\n"]
    server.replies.append(Reply.sse(frames) if stream else Reply(200, [answer]))
    async with OpenAIChatModel(
        f"http://127.0.0.1:{server.port}/v1",
        "gpt-test",
        stream=stream,
        timeout=SHORT_TIMEOUT,
        max_response_bytes=3500,
    ) as limited:
        with pytest.raises(ModelError, match="sent more than 3500 bytes"):
            await (_collect if stream else _call)(limited, _user("hi"))


async def test_malformed_json_answer_raises_model_error(model, server):
    server.replies.append(Reply(200, [b"<html>gateway</html>"]))

    with pytest.raises(ModelError, match="malformed JSON") as caught:
        await _call(model, _user("hi"))

    assert caught.value.body == "<html>gateway</html>"


async def test_unreachable_server_raises_model_error(server):
    port = server.port
    await server.stop()
    async with OpenAIChatModel(
        f"http://127.0.0.1:{port}/v1", "gpt-test", api_key=API_KEY, timeout=SHORT_TIMEOUT
    ) as model:
        with pytest.raises(ModelError, match="cannot reach model server") as caught:
            await _call(model, _user("hi"))
    assert caught.value.reason == "MODEL_ERROR"
    assert API_KEY not in str(caught.value)


async def test_read_timeout_raises_model_error(server):
    server.replies.append(Reply.sse(STREAMED_TEXT, delay=1.0))
    async with OpenAIChatModel(
        f"http://127.0.0.1:{server.port}/v1", "gpt-test", timeout=0.2
    ) as model:
        with pytest.raises(ModelError, match="broke: ReadTimeout"):
            await _collect(model, _user("hi"))


# --- Request bodies. ---

FLAT_CONVERSATION = [
    FlatMessage(role="system", content="You are terse."),
    FlatMessage(
        role="user",
        content="What is in this picture, and the weather there?",
        parts=[ImageBlock(source=InlineSource(data=PNG, mime_type="image/png"))],
    ),
    FlatMessage(
        role="assistant",
        content="Checking.",
        reasoning_content="Paris, so call the tool.",
        tool_calls=[ToolCall(id="call_1", name="get_weather", arguments='{"city": "Paris"}')],
    ),
    FlatMessage(role="tool", content="sunny, 21 C", tool_call_id="call_1", tool_name="get_weather"),
    FlatMessage(role="user", content="Thanks!"),
]

AGENTIC_CONVERSATION = [
    AgenticMessage(role="system", blocks=[TextBlock(text="You are terse.")]),
    AgenticMessage(
        role="user",
        blocks=[
            TextBlock(text="What is in this picture, and the weather there?"),
            ImageBlock(source=InlineSource(data=PNG, mime_type="image/png")),
        ],
    ),
    AgenticMessage(
        role="assistant",
        blocks=[
            ReasoningBlock(text="Paris, so call the tool."),
            TextBlock(text="Checking."),
            ToolCallBlock(call_id="call_1", name="get_weather", arguments='{"city": "Paris"}'),
        ],
    ),
    AgenticMessage(
        role="user",
        blocks=[
            ToolResultBlock(
                call_id="call_1", name="get_weather", output=[TextBlock(text="sunny, 21 C")]
            ),
            TextBlock(text="Thanks!"),
        ],
    ),
]

EXPECTED_MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is in this picture, and the weather there?"},
            {"type": "image_url", "image_url": {"url": PNG_URL}},
        ],
    },
    {
        "role": "assistant",
        "content": "Checking.",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 C"},
    {"role": "user", "content": "Thanks!"},
]


@pytest.mark.parametrize(
    "conversation", [FLAT_CONVERSATION, AGENTIC_CONVERSATION], ids=["flat", "agentic"]
)
async def test_conversation_request_body(model, server, conversation):
    server.replies.append(Reply.json(TEXT_ANSWER))

    await _call(model, conversation, tools=[WEATHER_TOOL])

    body = server.requests[0].body
    assert body["messages"] == EXPECTED_MESSAGES
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather for a city.",
                "parameters": WEATHER_TOOL["parameters"],
            },
        }
    ]
    assert body["tool_choice"] == "auto"


@pytest.mark.parametrize(
    ("dialect", "expected"),
    [
        (
            "json_schema",
            {
                "type": "json_schema",
                "json_schema": {"name": "Weather", "schema": WEATHER_TOOL["parameters"]},
            },
        ),
        ("json_object", {"type": "json_object", "schema": WEATHER_TOOL["parameters"]}),
    ],
)
async def test_a_structured_answer_is_asked_in_the_servers_dialect(server, dialect, expected):
    server.replies.append(Reply.json(TEXT_ANSWER))
    output = OutputFormat("Weather", WEATHER_TOOL["parameters"])
    async with OpenAIChatModel(
        f"http://127.0.0.1:{server.port}/v1", "gpt-test", stream=False, response_format=dialect
    ) as model:
        assert model.native_output
        await _call(model, _user("weather?"), output=output)
    assert server.requests[0].body["response_format"] == expected


async def test_a_server_without_a_json_schema_mode_is_not_native() -> None:
    model = OpenAIChatModel("http://127.0.0.1:9/v1", "m", response_format="none")
    assert not model.native_output
    await model.aclose()


async def test_media_parts_and_tool_output_media(model, server):
    wav = b"RIFF....WAVEfmt "
    pdf = b"%PDF-1.7"
    conversation = [
        AgenticMessage(
            role="assistant",
            blocks=[ToolCallBlock(call_id="c1", name="snapshot", arguments="{}")],
        ),
        AgenticMessage(
            role="user",
            blocks=[
                ToolResultBlock(
                    call_id="c1",
                    name="snapshot",
                    output=[
                        TextBlock(text="captured"),
                        ImageBlock(source=InlineSource(data=PNG, mime_type="image/png")),
                    ],
                )
            ],
        ),
        FlatMessage(
            role="user",
            parts=[
                ImageBlock(source={"type": "url", "url": "https://example.com/cat.png"}),
                DocumentBlock(
                    source=InlineSource(data=pdf, mime_type="application/pdf"), name="a.pdf"
                ),
            ],
        ),
        FlatMessage(
            role="user",
            content="transcribe",
            parts=[
                {
                    "type": "audio",
                    "source": {"type": "inline", "data": wav, "mime_type": "audio/wav"},
                }
            ],
        ),
    ]
    server.replies.append(Reply.json(TEXT_ANSWER))

    await _call(model, conversation)

    assert server.requests[0].body["messages"] == [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "snapshot", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "captured"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Output of tool call c1:"},
                {"type": "image_url", "image_url": {"url": PNG_URL}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
                {
                    "type": "file",
                    "file": {
                        "file_data": "data:application/pdf;base64,"
                        + base64.b64encode(pdf).decode(),
                        "filename": "a.pdf",
                    },
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "transcribe"},
                {
                    "type": "input_audio",
                    "input_audio": {"data": base64.b64encode(wav).decode(), "format": "wav"},
                },
            ],
        },
    ]


@pytest.mark.parametrize("kind", ["flat", "agentic"])
async def test_assistant_media_follows_as_a_user_message(model, server, kind):
    # What a return-directly tool with an image leaves as the final answer.
    image = ImageBlock(source=InlineSource(data=PNG, mime_type="image/png"))
    answer = make_assistant(kind, blocks=[TextBlock(text="Your chart:"), image])
    server.replies.append(Reply.json(TEXT_ANSWER))

    await _call(model, [answer, make_user_text(kind, "Explain it.")])

    assert server.requests[0].body["messages"] == [
        {"role": "assistant", "content": "Your chart:"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Media of the assistant's answer above:"},
                {"type": "image_url", "image_url": {"url": PNG_URL}},
            ],
        },
        {"role": "user", "content": "Explain it."},
    ]


async def test_system_media_raises_before_sending(model, server):
    image = ImageBlock(source=InlineSource(data=PNG, mime_type="image/png"))
    with pytest.raises(ModelError, match="only in user messages, not system"):
        await _call(model, [FlatMessage(role="system", content="look", parts=[image])])
    assert server.requests == []


@pytest.mark.parametrize(
    "blocks",
    [
        [{"type": "video", "source": {"type": "url", "url": "https://example.com/v.mp4"}}],
        [{"type": "audio", "source": {"type": "inline", "data": b"x", "mime_type": "audio/ogg"}}],
        [{"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}}],
    ],
    ids=["video", "ogg-audio", "url-document"],
)
async def test_unsupported_media_raises_before_sending(model, server, blocks):
    with pytest.raises(ModelError, match="Chat Completions"):
        await _call(model, [AgenticMessage(role="user", blocks=blocks)])
    assert server.requests == []


@pytest.mark.parametrize(
    ("tool_choice", "expected"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        ("get_weather", {"type": "function", "function": {"name": "get_weather"}}),
    ],
)
async def test_tool_choice_forms(model, server, tool_choice, expected):
    server.replies.append(Reply.json(TEXT_ANSWER))

    await _call(model, _user("hi"), tools=[WEATHER_TOOL, TIME_TOOL], tool_choice=tool_choice)

    body = server.requests[0].body
    assert body["tool_choice"] == expected
    assert [t["function"]["name"] for t in body["tools"]] == ["get_weather", "get_time"]
    assert body["tools"][1]["function"]["parameters"] == {"type": "object", "properties": {}}


async def test_no_tools_omits_tools_and_tool_choice(model, server):
    server.replies.append(Reply.json(TEXT_ANSWER))

    await _call(model, _user("hi"), tool_choice="required")

    assert "tools" not in server.requests[0].body
    assert "tool_choice" not in server.requests[0].body


async def test_extra_body_is_merged_and_no_key_sends_no_authorization(server):
    server.replies.append(Reply.json(TEXT_ANSWER))
    async with OpenAIChatModel(
        f"http://127.0.0.1:{server.port}/v1/",
        "local",
        stream=False,
        extra_body={"max_tokens": 16, "temperature": 0},
    ) as model:
        await _call(model, _user("hi"))

    request = server.requests[0]
    assert request.path == "/v1/chat/completions"
    assert "authorization" not in request.headers
    assert request.body["max_tokens"] == 16
    assert request.body["temperature"] == 0
    assert model.model_name == "local"
    assert model.provider_name == "openai"
