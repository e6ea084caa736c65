"""A chat model speaking the OpenAI Chat Completions HTTP API (OpenAI, llama.cpp, vLLM...)."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from types import TracebackType
from typing import Any

import httpx

from hookmesh.models._base import (
    ChatModel,
    ModelChunk,
    ModelError,
    ModelResponse,
    ModelResult,
    OutputFormat,
    ToolCallDelta,
    ToolChoice,
)
from hookmesh.models._openai_wire import ResponseFormat, request_body
from hookmesh.schema import (
    Message,
    MessageKind,
    ToolCall,
    Usage,
    make_assistant,
)

_BODY_LIMIT = 2000
_DETAIL_LIMIT = 200


DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024
"""Most bytes one model answer may take by default."""


class OpenAIChatModel(ChatModel):
    """A model behind an OpenAI-compatible ``/chat/completions`` endpoint.

    Messages of either kind are converted through `to_flat`. Media goes in user messages only:
    images as ``image_url``, wav/mp3 audio as ``input_audio``, documents as ``file`` (inline
    sources only for audio and documents); media in a tool result follows the tool messages
    as a user message, since the API accepts only text there, and so does media of an
    assistant message (a return-directly tool's image). Video, and media in system messages,
    fail with `ModelError`. Reasoning is read from answers but never sent
    back; message names are not sent.

    A streamed result holds an HTTP connection until it is exhausted or closed: iterate it to
    the end or call its ``aclose()``.

    Example:
        async with OpenAIChatModel("http://127.0.0.1:8080/v1", "smollm2") as model:
            response = await model([make_user_text("flat", "hi")])
    """

    provider_name = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str = "",
        stream: bool = True,
        timeout: float = 60,
        extra_body: dict[str, Any] | None = None,
        client: httpx.AsyncClient | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        response_format: ResponseFormat = "json_schema",
    ) -> None:
        """Create the model; no request is sent until the first call.

        Args:
            base_url: API root, e.g. ``http://127.0.0.1:8080/v1`` (``/chat/completions`` is
                appended).
            model: Model name sent in each request and reported as `model_name`.
            api_key: Bearer token; empty sends no Authorization header. Secret: it is never
                logged and is redacted from error messages and bodies.
            stream: Whether calls return a chunk stream (SSE) rather than a full response.
            timeout: Seconds allowed for connecting and for each read or write (for streams:
                between two arriving pieces, not for the whole answer).
            extra_body: Fields merged into every request body last (e.g. ``max_tokens``,
                ``temperature``), so they may override the defaults.
            client: An HTTP client to use; the caller keeps ownership and closes it. By
                default the model creates one and `aclose` closes it.
            max_response_bytes: Most bytes one answer (a whole stream included) may take;
                beyond, the call fails with `ModelError` instead of filling memory.
            response_format: How the server takes a JSON-schema answer format
                (`ResponseFormat`); ``none`` when it has no such mode, so structured answers
                come through a final-answer tool instead.
        """
        self.base_url = base_url.rstrip("/")
        self.model_name = model
        self.stream = stream
        self.timeout = timeout
        self.extra_body = dict(extra_body or {})
        self.max_response_bytes = max_response_bytes
        self.response_format: ResponseFormat = response_format
        self.native_output = response_format != "none"
        self._api_key = api_key
        self._owns_client = client is None
        self._client = client or httpx.AsyncClient(timeout=timeout)

    async def aclose(self) -> None:
        """Close the HTTP client if the model created it."""
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self) -> OpenAIChatModel:
        return self

    async def __aexit__(
        self,
        unused_exc_type: type[BaseException] | None,
        unused_exc: BaseException | None,
        unused_tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def __call__(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[dict[str, Any]] = (),
        tool_choice: ToolChoice = "auto",
        kind: MessageKind = "flat",
        output: OutputFormat | None = None,
    ) -> ModelResult:
        """Send one Chat Completions request; see `ChatModel.__call__`.

        HTTP and connection errors raise here, before any chunk; a malformed stream raises
        from the iteration.

        Raises:
            ModelError: Unsupported content, an unreachable server, a non-2xx answer
                (``status`` and ``body`` set), or a malformed response.
        """
        body = request_body(
            self.model_name,
            messages,
            tools,
            tool_choice,
            stream=self.stream,
            output=output,
            response_format=self.response_format,
        )
        body.update(self.extra_body)
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        if self.stream:
            headers["Accept"] = "text/event-stream"
        request = self._client.build_request(
            "POST",
            f"{self.base_url}/chat/completions",
            json=body,
            headers=headers,
            timeout=self.timeout,
        )
        try:
            response = await self._client.send(request, stream=True)
        except httpx.TimeoutException as exc:
            raise ModelError(
                f"model server {self.base_url} timed out after {self.timeout}s"
            ) from exc
        except httpx.HTTPError as exc:
            raise ModelError(
                self._redact(f"cannot reach model server {self.base_url}: {exc!r}")
            ) from exc
        try:
            if not response.is_success:
                raw = await self._read(response)
                detail = _error_detail(raw)
                raise ModelError(
                    self._redact(f"model server answered HTTP {response.status_code}: {detail}"),
                    status=response.status_code,
                    body=self._redact(raw[:_BODY_LIMIT]),
                )
            if self.stream:
                return _ChunkStream(response, self._chunks(response))
            raw = await self._read(response)
        except BaseException:
            await response.aclose()
            raise
        data = self._json(raw)
        return self._response(data, kind)

    def _too_large(self) -> ModelError:
        return ModelError(
            f"model server {self.base_url} sent more than {self.max_response_bytes} bytes"
        )

    async def _read(self, response: httpx.Response) -> str:
        body = bytearray()
        try:
            async for piece in response.aiter_bytes():
                body += piece
                if len(body) > self.max_response_bytes:
                    raise self._too_large()
            return body.decode("utf-8", "replace")
        except httpx.HTTPError as exc:
            raise ModelError(f"reading the answer of {self.base_url} failed: {exc!r}") from exc
        finally:
            await response.aclose()

    def _json(self, raw: str) -> dict[str, Any]:
        try:
            data = json.loads(raw)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise ModelError(
                "model server sent malformed JSON", body=self._redact(raw[:_BODY_LIMIT])
            )
        if isinstance(data.get("error"), dict):
            raise ModelError(
                self._redact(f"model server reported an error: {_error_detail(raw)}"),
                body=self._redact(raw[:_BODY_LIMIT]),
            )
        return data

    def _response(self, data: dict[str, Any], kind: MessageKind) -> ModelResponse:
        choices = data.get("choices")
        if not choices or not isinstance(choices[0], dict):
            raise ModelError(
                "model server answered without choices", body=self._redact(_dump(data))
            )
        choice = choices[0]
        message = choice.get("message") or {}
        calls = []
        for i, call in enumerate(message.get("tool_calls") or ()):
            function = call.get("function") or {}
            arguments = function.get("arguments") or ""
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments)
            calls.append(
                ToolCall(
                    id=call.get("id") or f"call_{i}",
                    name=function.get("name") or "",
                    arguments=arguments,
                )
            )
        return ModelResponse(
            message=make_assistant(
                kind,
                _text(message.get("content")),
                calls,
                reasoning=_reasoning(message),
                name=self.model_name,
            ),
            usage=_usage(data.get("usage")),
            stop_reason=choice.get("finish_reason") or "",
            response_id=data.get("id") or "",
        )

    async def _chunks(self, response: httpx.Response) -> AsyncGenerator[ModelChunk, None]:
        calls: dict[int, str] = {}
        named: set[int] = set()
        usage: Usage | None = None
        stop = ""
        response_id = ""
        try:
            async for payload in self._events(response):
                if payload == "[DONE]":
                    break
                data = self._json(payload)
                response_id = data.get("id") or response_id
                usage = _usage(data.get("usage")) or usage
                for choice in (data.get("choices") or ())[:1]:
                    delta = choice.get("delta") or {}
                    if reasoning := _reasoning(delta):
                        yield ModelChunk(reasoning=reasoning)
                    if text := _text(delta.get("content")):
                        yield ModelChunk(text=text)
                    for piece in delta.get("tool_calls") or ():
                        index = piece.get("index", len(calls))
                        function = piece.get("function") or {}
                        fragment = function.get("arguments") or ""
                        name = "" if index in named else function.get("name") or ""
                        first = index not in calls
                        if first:
                            calls[index] = piece.get("id") or f"call_{index}"
                        if name:
                            named.add(index)
                        if first or name or fragment:
                            yield ModelChunk(tool_call=ToolCallDelta(calls[index], name, fragment))
                    stop = choice.get("finish_reason") or stop
            else:
                if not stop:
                    raise ModelError("model stream ended before the model finished")
            yield ModelChunk(usage=usage, stop_reason=stop, response_id=response_id)
        finally:
            await response.aclose()

    async def _events(self, response: httpx.Response) -> AsyncIterator[str]:
        """The data of each server-sent event, as the bytes arrive."""
        data: list[str] = []
        try:
            async for line in response.aiter_lines():
                # Bytes off the wire (not decoded characters: non-ASCII text is up to 4x).
                if response.num_bytes_downloaded > self.max_response_bytes:
                    raise self._too_large()
                if not line:
                    if data:
                        yield "\n".join(data)
                        data = []
                    continue
                field, _, value = line.partition(":")
                if field == "data":
                    data.append(value.removeprefix(" "))
        except httpx.HTTPError as exc:
            raise ModelError(f"model stream from {self.base_url} broke: {exc!r}") from exc
        if data:
            yield "\n".join(data)

    def _redact(self, text: str) -> str:
        return text.replace(self._api_key, "[REDACTED]") if self._api_key else text


class _ChunkStream:
    """The chunks of one streamed answer; `aclose` frees the connection, started or not."""

    def __init__(self, response: httpx.Response, chunks: AsyncGenerator[ModelChunk, None]) -> None:
        self._response = response
        self._chunks = chunks

    def __aiter__(self) -> _ChunkStream:
        return self

    async def __anext__(self) -> ModelChunk:
        return await anext(self._chunks)

    async def aclose(self) -> None:
        """Stop the stream and close its HTTP response."""
        try:
            await self._chunks.aclose()
        finally:
            await self._response.aclose()


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _reasoning(message: dict[str, Any]) -> str:
    # NOTE(openai): DeepSeek and llama.cpp send reasoning_content; vLLM and OpenRouter, reasoning.
    value = message.get("reasoning_content") or message.get("reasoning")
    return value if isinstance(value, str) else ""


def _usage(data: Any) -> Usage | None:
    if not isinstance(data, dict):
        return None
    prompt_details = data.get("prompt_tokens_details") or {}
    completion_details = data.get("completion_tokens_details") or {}
    return Usage(
        input_tokens=data.get("prompt_tokens") or 0,
        output_tokens=data.get("completion_tokens") or 0,
        cache_read_tokens=prompt_details.get("cached_tokens") or 0,
        reasoning_tokens=completion_details.get("reasoning_tokens") or 0,
    )


def _error_detail(raw: str) -> str:
    """The server's own error message when the body is an OpenAI error object, else the body."""
    try:
        error = json.loads(raw).get("error")
    except (ValueError, AttributeError):
        error = None
    detail = error.get("message") if isinstance(error, dict) else error
    text = detail if isinstance(detail, str) and detail else raw.strip() or "(empty body)"
    return text if len(text) <= _DETAIL_LIMIT else text[:_DETAIL_LIMIT] + "..."


def _dump(data: dict[str, Any]) -> str:
    return json.dumps(data)[:_BODY_LIMIT]
