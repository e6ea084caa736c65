"""Text to speech: the reply's text blocks also arrive as audio data blocks, spoken as written."""

from hookmesh.middleware.builtin.tts._middleware import (
    WARNING_EVENT,
    Speaker,
    TTSError,
    TTSMiddleware,
    TTSMode,
)

__all__ = [
    "WARNING_EVENT",
    "Speaker",
    "TTSError",
    "TTSMiddleware",
    "TTSMode",
]
