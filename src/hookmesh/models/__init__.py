"""Chat models: the interface, a scripted model, the offline demo model, an OpenAI-compatible
HTTP model, and helpers for asking one for a (JSON) answer."""

from hookmesh.models._answers import answer_text, json_answer, json_text
from hookmesh.models._base import (
    FINAL_TOOL,
    STOP_CUT,
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
    DemoModelConfig,
    ModelConfig,
    OpenAIModelConfig,
    ScriptedModelConfig,
    build_model,
    openai_model_from_env,
)
from hookmesh.models._demo import HELP as DEMO_HELP
from hookmesh.models._demo import DemoChatModel
from hookmesh.models._demo_intents import Intent, intent_of
from hookmesh.models._openai import OpenAIChatModel
from hookmesh.models._scripted import NO_TOOLS_TEXT, ScriptedChatModel, ScriptedTurn

__all__ = [
    "DEMO_HELP",
    "FINAL_TOOL",
    "NO_TOOLS_TEXT",
    "STOP_CUT",
    "TOOL_CHOICE_MODES",
    "ChatModel",
    "DemoChatModel",
    "DemoModelConfig",
    "Intent",
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
    "intent_of",
    "json_answer",
    "json_text",
    "openai_model_from_env",
]
