"""The agent service: sessions of one configured agent over gRPC."""

from hookmesh.services.agent._app import (
    ADMIN_SERVICE_NAME,
    SERVICE_NAME,
    AgentService,
    start_agent_service,
)
from hookmesh.services.agent._chain import MiddlewareChain
from hookmesh.services.agent._config import AgentServiceConfig, SidecarConfig, load_config
from hookmesh.services.agent._open import open_store
from hookmesh.services.agent._pgstore import PostgresSessionStore
from hookmesh.services.agent._reload import MiddlewareReloader
from hookmesh.services.agent._servicer import AgentServicer
from hookmesh.services.agent._sqlitestore import SqliteSessionStore
from hookmesh.services.agent._store import Lease, LeaseLostError, SessionLeases, SessionStore

__all__ = [
    "ADMIN_SERVICE_NAME",
    "SERVICE_NAME",
    "AgentService",
    "AgentServiceConfig",
    "AgentServicer",
    "Lease",
    "LeaseLostError",
    "MiddlewareChain",
    "MiddlewareReloader",
    "PostgresSessionStore",
    "SessionLeases",
    "SessionStore",
    "SidecarConfig",
    "SqliteSessionStore",
    "load_config",
    "open_store",
    "start_agent_service",
]
