"""The memory service: long-term memories of users over gRPC (SQLite or PostgreSQL)."""

from hookmesh.services.memory._app import SERVICE_NAME, MemoryService, start_memory_service
from hookmesh.services.memory._config import MemoryServiceConfig, load_memory_config
from hookmesh.services.memory._servicer import MemoryServicer

__all__ = [
    "SERVICE_NAME",
    "MemoryService",
    "MemoryServiceConfig",
    "MemoryServicer",
    "load_memory_config",
    "start_memory_service",
]
