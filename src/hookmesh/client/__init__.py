"""Clients of the hookmesh services."""

import importlib
from typing import Any

from hookmesh.client._agent_client import (
    DEFAULT_TIMEOUT,
    AgentClient,
    AgentInfo,
    AgentTool,
    ReplyStream,
    SessionInfo,
    SyncAgentClient,
    text_of_events,
)
from hookmesh.client._errors import AgentClientError

_LAZY = {
    "AdminClient": "hookmesh.client._admin_client",
    "ReloadResult": "hookmesh.client._admin_client",
    "RetrievalClient": "hookmesh.client._retrieval_client",
    "IngestReport": "hookmesh.client._retrieval_client",
    "DocumentError": "hookmesh.client._retrieval_client",
    "MemoryClient": "hookmesh.client._memory_client",
    "TTSClient": "hookmesh.client._tts_client",
    "limits_from_proto": "hookmesh.client._limits",
    "limits_to_proto": "hookmesh.client._limits",
}


def __getattr__(name: str) -> Any:
    # NOTE(hookmesh): the domain clients pull in numpy and the services' types; import them
    # only when asked for, so `hookmesh chat` stays quick to start.
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'hookmesh.client' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "DEFAULT_TIMEOUT",
    "AdminClient",
    "AgentClient",
    "AgentClientError",
    "AgentInfo",
    "AgentTool",
    "DocumentError",
    "IngestReport",
    "MemoryClient",
    "ReloadResult",
    "ReplyStream",
    "RetrievalClient",
    "SessionInfo",
    "SyncAgentClient",
    "TTSClient",
    "limits_from_proto",
    "limits_to_proto",
    "text_of_events",
]
