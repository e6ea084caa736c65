"""The agent service: sessions of one configured agent over gRPC."""

from hookmesh.services.agent._app import SERVICE_NAME, AgentService, start_agent_service
from hookmesh.services.agent._config import AgentServiceConfig, SidecarConfig, load_config
from hookmesh.services.agent._servicer import AgentServicer
from hookmesh.services.agent._store import SessionStore, SqliteSessionStore, open_store

__all__ = [
    "SERVICE_NAME",
    "AgentService",
    "AgentServiceConfig",
    "AgentServicer",
    "SessionStore",
    "SidecarConfig",
    "SqliteSessionStore",
    "load_config",
    "open_store",
    "start_agent_service",
]
