"""Chat models: the interface, a scripted model, an OpenAI-compatible HTTP model, and
helpers for asking one for a (JSON) answer."""

from hookmesh.models._answers import answer_text, json_answer, json_text
from hookmesh.models._base import (
    TOOL_CHOICE_MODES,
    ChatModel,
    ModelChunk,
    ModelError,
    ModelRef,
    ModelResponse,
    ModelResult,
    OutputFormat,
    ToolCallDelta,
    ToolChoice,
)
from hookmesh.models._config import (
    ModelConfig,
    OpenAIModelConfig,
    ScriptedModelConfig,
    build_model,
    openai_model_from_env,
)
from hookmesh.models._openai import OpenAIChatModel
from hookmesh.models._scripted import NO_TOOLS_TEXT, ScriptedChatModel, ScriptedTurn

__all__ = [
    "NO_TOOLS_TEXT",
    "TOOL_CHOICE_MODES",
    "ChatModel",
    "ModelChunk",
    "ModelConfig",
    "ModelError",
    "ModelRef",
    "ModelResponse",
    "ModelResult",
    "OpenAIChatModel",
    "OpenAIModelConfig",
    "OutputFormat",
    "ScriptedChatModel",
    "ScriptedModelConfig",
    "ScriptedTurn",
    "ToolCallDelta",
    "ToolChoice",
    "answer_text",
    "build_model",
    "json_answer",
    "json_text",
    "openai_model_from_env",
]
