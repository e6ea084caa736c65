"""The text-to-speech service: espeak-ng (or another engine) streamed over gRPC."""

from hookmesh.services.tts._app import SERVICE_NAME, TTSService, start_tts_service
from hookmesh.services.tts._audio import (
    AudioChunk,
    AudioFormat,
    PcmFormat,
    Voice,
    VoiceCatalog,
    pcm_format_of,
    wav_header,
)
from hookmesh.services.tts._backend import BackendError, TTSBackend, Utterance
from hookmesh.services.tts._config import TTSServiceConfig, load_tts_config
from hookmesh.services.tts._engine import DEFAULT_MAX_TEXT_CHARS, SpeechStream, TTSEngine
from hookmesh.services.tts._espeak import EspeakBackend
from hookmesh.services.tts._record import SpeechRecorder, WavWriter
from hookmesh.services.tts._segment import Segmenter
from hookmesh.services.tts._servicer import TTSServicer

__all__ = [
    "DEFAULT_MAX_TEXT_CHARS",
    "SERVICE_NAME",
    "AudioChunk",
    "AudioFormat",
    "BackendError",
    "EspeakBackend",
    "PcmFormat",
    "Segmenter",
    "SpeechRecorder",
    "SpeechStream",
    "TTSBackend",
    "TTSEngine",
    "TTSService",
    "TTSServiceConfig",
    "TTSServicer",
    "Utterance",
    "Voice",
    "VoiceCatalog",
    "WavWriter",
    "load_tts_config",
    "pcm_format_of",
    "start_tts_service",
    "wav_header",
]
