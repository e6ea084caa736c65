"""The retrieval service: knowledge bases, streamed ingest and hybrid search over gRPC."""

from hookmesh.services.retrieval._app import (
    SERVICE_NAME,
    RetrievalService,
    start_retrieval_service,
)
from hookmesh.services.retrieval._config import RetrievalServiceConfig, load_retrieval_config
from hookmesh.services.retrieval._servicer import DEFAULT_TOP_K, RetrievalServicer

__all__ = [
    "DEFAULT_TOP_K",
    "SERVICE_NAME",
    "RetrievalService",
    "RetrievalServiceConfig",
    "RetrievalServicer",
    "load_retrieval_config",
    "start_retrieval_service",
]
