"""Hookmesh messages and tools as an OpenAI Chat Completions request body."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any, Literal

from hookmesh.models._base import TOOL_CHOICE_MODES, ModelError, OutputFormat, ToolChoice
from hookmesh.schema import FlatMessage, Message, ToolOutputBlock, text_of, to_flat, tool_results

ResponseFormat = Literal["json_schema", "json_object", "none"]
"""How a server takes a JSON-schema answer format: ``json_schema`` is OpenAI's
``{"type": "json_schema", "json_schema": {"name", "schema"}}`` (OpenAI, vLLM, llama.cpp's
``llama-server``, Ollama); ``json_object`` is ``{"type": "json_object", "schema"}``
(llama-cpp-python's server, Together, Anyscale); ``none``: the server has no such mode."""

_AUDIO_FORMATS = {
    "audio/wav": "wav",
    "audio/wave": "wav",
    "audio/x-wav": "wav",
    "audio/vnd.wave": "wav",
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
}


def request_body(
    model: str,
    messages: Sequence[Message],
    tools: Sequence[dict[str, Any]] = (),
    tool_choice: ToolChoice = "auto",
    *,
    stream: bool = False,
    output: OutputFormat | None = None,
    response_format: ResponseFormat = "json_schema",
) -> dict[str, Any]:
    """The Chat Completions request body for a call (without `extra_body`).

    Args:
        model: Model name.
        messages: The prompt, in either kind.
        tools: Tool definitions ``{"name", "description", "parameters"}``.
        tool_choice: ``auto``, ``none``, ``required`` or one tool's name; ignored without tools.
        stream: Ask for SSE with a final usage chunk.
        output: A structured answer's format, sent as `response_format` says.
        response_format: The server's dialect for `output` (ignored without it).

    Returns:
        The JSON-ready body.

    Raises:
        ModelError: A message holds content the API cannot take.
    """
    body: dict[str, Any] = {"model": model, "messages": wire_messages(messages)}
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    if tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t["name"],
                    "description": t.get("description", ""),
                    "parameters": t.get("parameters") or {"type": "object", "properties": {}},
                },
            }
            for t in tools
        ]
        body["tool_choice"] = (
            tool_choice
            if tool_choice in TOOL_CHOICE_MODES
            else {"type": "function", "function": {"name": tool_choice}}
        )
    if output is not None and response_format != "none":
        body["response_format"] = _response_format(output, response_format)
    return body


def _response_format(output: OutputFormat, dialect: ResponseFormat) -> dict[str, Any]:
    if dialect == "json_object":
        return {"type": "json_object", "schema": output.schema}
    spec: dict[str, Any] = {"name": output.name, "schema": output.schema}
    if output.description:
        spec["description"] = output.description
    return {"type": "json_schema", "json_schema": spec}


def wire_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Messages of either kind as Chat Completions messages (see `OpenAIChatModel`).

    Raises:
        ModelError: A message holds content the API cannot take.
    """
    out: list[dict[str, Any]] = []
    tool_media: list[dict[str, Any]] = []
    for msg in to_flat(messages):
        if msg.role != "tool" and tool_media:
            out.append({"role": "user", "content": tool_media})
            tool_media = []
        media = [p for p in msg.parts if p.type != "text"]
        if msg.role == "tool":
            (result,) = tool_results(msg)
            out.append({"role": "tool", "tool_call_id": msg.tool_call_id, "content": result.text})
            if media:
                tool_media.append(
                    {"type": "text", "text": f"Output of tool call {msg.tool_call_id}:"}
                )
                tool_media.extend(_part(p) for p in media)
        elif msg.role == "user":
            out.append({"role": "user", "content": _user_content(msg) if media else text_of(msg)})
        elif msg.role == "assistant":
            # NOTE(openai): content is always a string: llama.cpp rejects null and missing content
            # next to tool_calls, and OpenAI accepts "".
            entry: dict[str, Any] = {"role": "assistant", "content": text_of(msg)}
            if msg.tool_calls:
                entry["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments},
                    }
                    for c in msg.tool_calls
                ]
            out.append(entry)
            if media:
                # NOTE(openai): the API takes media from users only; an assistant's (a
                # return-directly tool's image) follows as a user message, like tool media.
                note = {"type": "text", "text": "Media of the assistant's answer above:"}
                out.append({"role": "user", "content": [note, *(_part(p) for p in media)]})
        elif media:
            raise ModelError(f"Chat Completions takes media only in user messages, not {msg.role}")
        else:
            out.append({"role": msg.role, "content": text_of(msg)})
    if tool_media:
        out.append({"role": "user", "content": tool_media})
    return out


def _user_content(msg: FlatMessage) -> list[dict[str, Any]]:
    parts = [{"type": "text", "text": msg.content}] if msg.content else []
    parts.extend(_part(p) for p in msg.parts)
    return parts


def _part(block: ToolOutputBlock) -> dict[str, Any]:
    if block.type == "text":
        return {"type": "text", "text": block.text}
    source = block.source
    if block.type == "image":
        url = source.url if source.type == "url" else _data_url(source.mime_type, source.data)
        return {"type": "image_url", "image_url": {"url": url}}
    if block.type == "audio" and source.type == "inline":
        audio_format = _AUDIO_FORMATS.get(source.mime_type.lower())
        if audio_format is None:
            raise ModelError(f"Chat Completions takes wav or mp3 audio, not {source.mime_type}")
        data = base64.b64encode(source.data).decode()
        return {"type": "input_audio", "input_audio": {"data": data, "format": audio_format}}
    if block.type == "document" and source.type == "inline":
        file_data = _data_url(source.mime_type, source.data)
        filename = block.name or "document"
        return {"type": "file", "file": {"file_data": file_data, "filename": filename}}
    where = "inline" if source.type == "inline" else "URL"
    raise ModelError(f"Chat Completions cannot take {where} {block.type} content")


def _data_url(mime_type: str, data: bytes) -> str:
    return f"data:{mime_type};base64,{base64.b64encode(data).decode()}"
