"""Building and starting the TTS service from its configuration."""

from __future__ import annotations

from dataclasses import dataclass

# NOTE(hookmesh): hookmesh.remote first: services._server and remote import each other, and
# only this order resolves.
import hookmesh.remote  # noqa: F401
from hookmesh.server import RunningServer, Service, start_server
from hookmesh.services.tts._config import TTSServiceConfig
from hookmesh.services.tts._servicer import TTSServicer
from hookmesh.tts import EspeakBackend, TTSBackend, TTSEngine
from hookmesh.v1 import tts_pb2 as _tts_pb2
from hookmesh.v1 import tts_pb2_grpc as _tts_grpc

SERVICE_NAME = _tts_pb2.DESCRIPTOR.services_by_name["TTSService"].full_name


@dataclass
class TTSService:
    """A running TTS service: its server, servicer and engine."""

    server: RunningServer
    servicer: TTSServicer
    engine: TTSEngine

    @property
    def port(self) -> int:
        """The bound port."""
        return self.server.port

    @property
    def backend(self) -> TTSBackend:
        """The speech engine (for espeak-ng: `live_pids`, `wait_idle`)."""
        return self.engine.backend

    async def stop(self, grace: float | None) -> None:
        """Report NOT_SERVING, let in-flight syntheses finish for `grace` s, then stop them
        (every engine process is killed)."""
        try:
            await self.server.stop(grace)
        finally:
            await self.engine.backend.aclose()


async def start_tts_service(
    config: TTSServiceConfig,
    *,
    address: str | None = None,
    backend: TTSBackend | None = None,
) -> TTSService:
    """Start serving speech (health, reflection, tracing), espeak-ng unless `backend` is given.

    The voice list is read before the server starts, so a missing engine fails here.

    Args:
        config: The configuration.
        address: Overrides `config.listen` (tests pass ``127.0.0.1:0``).
        backend: Another speech engine.

    Raises:
        BackendError: The engine is missing or broken (reason ``ENGINE_NOT_INSTALLED``...).
    """
    backend = backend or EspeakBackend(config.espeak_binary)
    await backend.catalog()
    engine = TTSEngine(
        backend, max_text_chars=config.max_text_chars, max_concurrent=config.max_concurrent
    )
    servicer = TTSServicer(engine)
    server = await start_server(
        [Service(SERVICE_NAME, servicer, _tts_grpc.add_TTSServiceServicer_to_server)],
        address or config.listen,
        auth=config.auth,
        metrics_listen=config.metrics_listen,
        metrics_allowed_hosts=config.metrics_allowed_hosts,
        metrics_token_env=config.metrics_token_env,
    )
    return TTSService(server, servicer, engine)
