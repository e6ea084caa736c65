"""Clients of the hookmesh services."""

from hookmesh.client._agent_client import (
    DEFAULT_TIMEOUT,
    AgentClient,
    SessionInfo,
    SyncAgentClient,
    text_of_events,
)
from hookmesh.client._errors import AgentClientError

__all__ = [
    "DEFAULT_TIMEOUT",
    "AgentClient",
    "AgentClientError",
    "SessionInfo",
    "SyncAgentClient",
    "text_of_events",
]
