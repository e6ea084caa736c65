"""Building and starting the memory service from its configuration."""

from __future__ import annotations

from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

# NOTE(hookmesh): hookmesh.remote first: services._server and remote import each other, and
# only this order resolves.
import hookmesh.remote  # noqa: F401
from hookmesh.memory import MemoryStore, open_memory_store
from hookmesh.models import build_model
from hookmesh.retrieval import Embedder, default_embedder
from hookmesh.server import Clock, RunningServer, Service, Sweeper, start_server, utc_now
from hookmesh.services.memory._config import MemoryServiceConfig
from hookmesh.services.memory._servicer import MemoryServicer
from hookmesh.v1 import memory_pb2 as _pb
from hookmesh.v1 import memory_pb2_grpc as _grpc

SERVICE_NAME = _pb.DESCRIPTOR.services_by_name["MemoryService"].full_name


@dataclass
class MemoryService:
    """A running memory service: its server, servicer, store and what to close on shutdown."""

    server: RunningServer
    servicer: MemoryServicer
    store: MemoryStore
    resources: AsyncExitStack
    retention: Sweeper
    """The memories' retention (its first sweep starts with the service)."""

    @property
    def port(self) -> int:
        """The bound port."""
        return self.server.port

    async def stop(self, grace: float | None) -> None:
        """Report NOT_SERVING, give in-flight calls `grace` seconds, then close the store
        (which waits for running commits) and the extraction model."""
        try:
            await self.retention.stop()
            await self.server.stop(grace)
        finally:
            await self.resources.aclose()


async def start_memory_service(
    config: MemoryServiceConfig,
    *,
    address: str | None = None,
    embedder: Embedder | None = None,
    clock: Clock = utc_now,
) -> MemoryService:
    """Open the store, build the extraction model and start serving (health, reflection,
    tracing).

    The embedder is loaded and the store opened (schema created) before the server starts,
    so a missing model file or an unreachable database fails here.

    Args:
        config: The configuration.
        address: Overrides `config.listen` (tests pass ``127.0.0.1:0``).
        embedder: Another embedder than the process-wide all-MiniLM-L6-v2.
        clock: The time retention measures ages against.

    Raises:
        EmbedderUnavailableError: The embedding model files are missing.
        ValueError: An unsupported store URL.
    """
    embedder = embedder or default_embedder()
    load: Any = getattr(embedder, "load", None)
    if load is not None:
        await load()
    stack = AsyncExitStack()
    try:
        model = build_model(config.model) if config.model is not None else None
        aclose: Any = getattr(model, "aclose", None)
        if aclose is not None:
            stack.push_async_callback(aclose)
        store = await open_memory_store(
            config.store,
            embedder=embedder,
            model=model,
            namespace=config.namespace,
            dedup_threshold=config.dedup_threshold,
            limits=config.limits(),
            extraction_instruction=config.extraction_instruction,
            extraction_timeout=config.extraction_timeout,
        )
        stack.push_async_callback(store.close)
        servicer = MemoryServicer(store, config.max_request_bytes)
        server = await start_server(
            [Service(SERVICE_NAME, servicer, _grpc.add_MemoryServiceServicer_to_server)],
            address or config.listen,
            auth=config.auth,
            options=[("grpc.max_receive_message_length", 2 * config.max_request_bytes)],
            metrics_listen=config.metrics_listen,
            metrics_allowed_hosts=config.metrics_allowed_hosts,
            metrics_token_env=config.metrics_token_env,
        )
    except BaseException:
        await stack.aclose()
        raise
    retention = Sweeper.of("memory.memories", store.knowledge.sweep, config.retention, clock)
    retention.start()
    return MemoryService(server, servicer, store, stack, retention)
