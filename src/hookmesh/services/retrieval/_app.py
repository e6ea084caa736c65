"""Building and starting the retrieval service from its configuration."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# NOTE(hookmesh): hookmesh.remote first: services._server and remote import each other, and
# only this order resolves.
import hookmesh.remote  # noqa: F401
from hookmesh.retrieval import Embedder, KnowledgeStore, default_embedder, open_knowledge_store
from hookmesh.server import Clock, RunningServer, Service, Sweeper, start_server, utc_now
from hookmesh.services.retrieval._config import RetrievalServiceConfig
from hookmesh.services.retrieval._servicer import RetrievalServicer
from hookmesh.v1 import retrieval_pb2 as _pb
from hookmesh.v1 import retrieval_pb2_grpc as _grpc

SERVICE_NAME = _pb.DESCRIPTOR.services_by_name["RetrievalService"].full_name


@dataclass
class RetrievalService:
    """A running retrieval service: its server, servicer and store."""

    server: RunningServer
    servicer: RetrievalServicer
    store: KnowledgeStore
    retention: Sweeper
    """The documents' retention (its first sweep starts with the service)."""

    @property
    def port(self) -> int:
        """The bound port."""
        return self.server.port

    async def stop(self, grace: float | None) -> None:
        """Report NOT_SERVING, give in-flight calls `grace` seconds, then close the store
        (which waits for running commits)."""
        try:
            await self.retention.stop()
            await self.server.stop(grace)
        finally:
            await self.store.close()


async def start_retrieval_service(
    config: RetrievalServiceConfig,
    *,
    address: str | None = None,
    embedder: Embedder | None = None,
    clock: Clock = utc_now,
) -> RetrievalService:
    """Open the store and start serving (health, reflection, tracing).

    The embedder is loaded and the store opened (schema created) before the server starts,
    so a missing model or an unreachable database fails here.

    Args:
        config: The configuration.
        address: Overrides `config.listen` (tests pass ``127.0.0.1:0``).
        embedder: Another embedder than the process-wide all-MiniLM-L6-v2.
        clock: The time retention measures ages against.

    Raises:
        EmbedderUnavailableError: The model files are missing.
        ValueError: An unsupported store URL.
    """
    embedder = embedder or default_embedder()
    load: Any = getattr(embedder, "load", None)
    if load is not None:
        await load()
    options: dict[str, Any] = {"limits": config.limits()}
    if config.store.startswith(("postgresql://", "postgres://")):
        options["namespace"] = config.namespace
    store = await open_knowledge_store(config.store, embedder, **options)
    try:
        servicer = RetrievalServicer(store, config)
        size = config.max_message_bytes()
        server = await start_server(
            [Service(SERVICE_NAME, servicer, _grpc.add_RetrievalServiceServicer_to_server)],
            address or config.listen,
            auth=config.auth,
            options=[("grpc.max_receive_message_length", size)],
            metrics_listen=config.metrics_listen,
            metrics_allowed_hosts=config.metrics_allowed_hosts,
            metrics_token_env=config.metrics_token_env,
        )
    except BaseException:
        await store.close()
        raise
    retention = Sweeper.of("retrieval.documents", store.sweep, config.retention, clock)
    retention.start()
    return RetrievalService(server, servicer, store, retention)
