"""The text-to-speech service: the `hookmesh.tts` engine streamed over gRPC."""

from hookmesh.services.tts._app import SERVICE_NAME, TTSService, start_tts_service
from hookmesh.services.tts._config import TTSServiceConfig, load_tts_config
from hookmesh.services.tts._servicer import TTSServicer

__all__ = [
    "SERVICE_NAME",
    "TTSService",
    "TTSServiceConfig",
    "TTSServicer",
    "load_tts_config",
    "start_tts_service",
]
