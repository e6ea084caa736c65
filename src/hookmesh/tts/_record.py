"""Saving speech as WAV files: from audio chunks (`hookmesh say`) or a reply's data blocks
(`hookmesh chat --speak`)."""

from __future__ import annotations

import os
import wave
from pathlib import Path
from typing import Any

from hookmesh.tts._audio import AudioChunk, PcmFormat, pcm_format_of


class WavWriter:
    """Writes PCM to a WAV file as it arrives, atomically: a ``.part`` file renamed on close.

    Args:
        path: The WAV file to write.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.format: PcmFormat | None = None
        self.frames = 0
        self._part = self.path.with_name(self.path.name + ".part")
        self._wav: wave.Wave_write | None = None

    def write(self, pcm: PcmFormat, data: bytes) -> None:
        """Append PCM of shape `pcm` (the first call fixes the file's shape)."""
        if self._wav is None:
            self.format = pcm
            self._wav = wave.open(str(self._part), "wb")  # noqa: SIM115 (closed in close())
            self._wav.setnchannels(pcm.channels)
            self._wav.setsampwidth(2)
            self._wav.setframerate(pcm.sample_rate)
        elif pcm != self.format:
            raise ValueError(f"audio shape changed from {self.format} to {pcm}")
        self._wav.writeframes(data)
        self.frames += len(data) // pcm.frame_bytes

    def add_chunk(self, chunk: AudioChunk) -> None:
        """Append a PCM audio chunk."""
        if chunk.format != "pcm":
            raise ValueError("WavWriter takes pcm chunks")
        if chunk.data:
            self.write(PcmFormat(chunk.sample_rate, chunk.channels), chunk.data)

    @property
    def seconds(self) -> float:
        """Duration written so far."""
        return self.frames / self.format.sample_rate if self.format else 0.0

    def close(self) -> bool:
        """Finish the file; False (and no file) when no audio was written."""
        if self._wav is None:
            return False
        self._wav.close()
        self._wav = None
        os.replace(self._part, self.path)
        return True

    def discard(self) -> None:
        """Drop what was written."""
        if self._wav is not None:
            self._wav.close()
            self._wav = None
            self._part.unlink(missing_ok=True)


class SpeechRecorder:
    """Collects the ``audio/pcm`` data blocks of a reply's events into a `WavWriter`.

    Blocks of another media type, or of another sample rate or channel count than the first
    block, are skipped (counted in `skipped`).
    """

    def __init__(self, writer: WavWriter) -> None:
        self.writer = writer
        self.skipped = 0
        self._open: dict[str, PcmFormat] = {}

    def add(self, event: Any) -> None:
        """Look at one event; keep the bytes of audio/pcm data blocks."""
        if event.type == "data_block_start":
            pcm = pcm_format_of(event.media_type)
            if pcm is None:
                return
            if self.writer.format is not None and pcm != self.writer.format:
                self.skipped += 1
                return
            self._open[event.block_id] = pcm
        elif event.type == "data_block_delta":
            pcm = self._open.get(event.block_id)
            if pcm is not None and event.data:
                self.writer.write(pcm, event.data)
        elif event.type == "data_block_end":
            self._open.pop(event.block_id, None)
