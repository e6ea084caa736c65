"""Chat models described in configuration files, and building them."""

from __future__ import annotations

import os
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from hookmesh.models._base import ChatModel
from hookmesh.models._demo import DemoChatModel
from hookmesh.models._openai import OpenAIChatModel
from hookmesh.models._scripted import ScriptedChatModel, ScriptedTurn


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _hello() -> list[str | dict[str, Any]]:
    return ["Hello from hookmesh."]


class ScriptedModelConfig(_Strict):
    """A scripted model (tests and the offline demo)."""

    type: Literal["scripted"] = "scripted"
    turns: list[str | dict[str, Any]] = Field(default_factory=_hello)
    """Each a text answer, or ``{text, tool_calls: [{name, arguments}], reasoning}``."""
    stream: bool = True
    """Stream the answer in chunks."""
    chunk_size: int = Field(8, ge=1)
    """Characters per streamed chunk."""
    repeat: bool = True
    """Start the script again when it runs out."""
    per_reply: bool = False
    """Choose each turn by the prompt: the first answers a user's message, the next the
    first tool results, and so on, so concurrent replies each play the script from its
    start (with ids that depend only on the prompt)."""
    native_output: bool = False
    """Claim a JSON-schema mode, so structured answers are asked for natively (the turns'
    text is the answer) rather than through the final-answer tool."""


class DemoModelConfig(_Strict):
    """The demo model: rule based, offline (the suite's default without a model server)."""

    type: Literal["demo"] = "demo"
    stream: bool = True
    """Stream the answer in chunks."""
    chunk_size: int = Field(8, ge=1)
    """Characters per streamed chunk."""


class OpenAIModelConfig(_Strict):
    """An OpenAI-compatible Chat Completions endpoint."""

    type: Literal["openai"] = "openai"
    base_url: str
    """E.g. ``http://127.0.0.1:8080/v1``."""
    model: str
    """The model name the server expects."""
    api_key_env: str = "OPENAI_API_KEY"
    """Environment variable holding the API key (the key itself never goes in the file)."""
    stream: bool = True
    """Use SSE streaming."""
    timeout: float = Field(60.0, gt=0)
    """Seconds per request."""
    response_format: Literal["json_schema", "json_object", "none"] = "json_schema"
    """How the server takes a JSON-schema answer format: OpenAI's ``json_schema`` (OpenAI,
    vLLM, llama-server, Ollama), ``json_object`` with a schema (llama-cpp-python's server),
    or ``none`` (structured answers then come through a final-answer tool)."""


def openai_model_from_env() -> dict[str, Any] | None:
    """The model config the standard ``OPENAI_BASE_URL`` / ``OPENAI_MODEL`` variables name
    (the key stays in ``OPENAI_API_KEY``); None when no base URL is set."""
    base_url = os.environ.get("OPENAI_BASE_URL")
    if not base_url:
        return None
    model = os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
    return {"type": "openai", "base_url": base_url, "model": model}


ModelConfig = Annotated[
    ScriptedModelConfig | DemoModelConfig | OpenAIModelConfig, Field(discriminator="type")
]
"""One configured model, tagged by ``type``."""


def build_model(config: ScriptedModelConfig | DemoModelConfig | OpenAIModelConfig) -> ChatModel:
    """The chat model a config entry describes."""
    if isinstance(config, DemoModelConfig):
        return DemoChatModel(stream=config.stream, chunk_size=config.chunk_size)
    if isinstance(config, ScriptedModelConfig):
        turns = []
        for turn in config.turns:
            if isinstance(turn, str):
                turns.append(ScriptedTurn(text=turn))
            else:
                calls = [(c["name"], c.get("arguments", {})) for c in turn.get("tool_calls", [])]
                turns.append(
                    ScriptedTurn(
                        text=turn.get("text", ""),
                        tool_calls=calls,
                        reasoning=turn.get("reasoning", ""),
                    )
                )
        return ScriptedChatModel(
            turns,
            stream=config.stream,
            chunk_size=config.chunk_size,
            repeat=config.repeat,
            per_reply=config.per_reply,
            native_output=config.native_output,
        )
    return OpenAIChatModel(
        config.base_url,
        config.model,
        api_key=os.environ.get(config.api_key_env, ""),
        stream=config.stream,
        timeout=config.timeout,
        response_format=config.response_format,
    )
