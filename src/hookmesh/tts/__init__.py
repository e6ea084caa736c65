"""Text to speech: the engine (espeak-ng streamed as produced, behind a backend interface),
audio formats, and WAV recording — the library under the TTS service, `hookmesh say` and
the TTS middleware."""

from hookmesh.tts._audio import (
    AudioChunk,
    AudioFormat,
    PcmFormat,
    Voice,
    VoiceCatalog,
    VoiceGender,
    pcm_format_of,
    wav_header,
)
from hookmesh.tts._backend import BackendError, TTSBackend, Utterance
from hookmesh.tts._engine import DEFAULT_MAX_TEXT_CHARS, SpeechStream, TTSEngine
from hookmesh.tts._espeak import EspeakBackend, parse_voices
from hookmesh.tts._process import Child, spawn
from hookmesh.tts._record import SpeechRecorder, WavWriter
from hookmesh.tts._segment import Segmenter

__all__ = [
    "DEFAULT_MAX_TEXT_CHARS",
    "AudioChunk",
    "AudioFormat",
    "BackendError",
    "Child",
    "EspeakBackend",
    "PcmFormat",
    "Segmenter",
    "SpeechRecorder",
    "SpeechStream",
    "TTSBackend",
    "TTSEngine",
    "Utterance",
    "Voice",
    "VoiceCatalog",
    "VoiceGender",
    "WavWriter",
    "parse_voices",
    "pcm_format_of",
    "spawn",
    "wav_header",
]
