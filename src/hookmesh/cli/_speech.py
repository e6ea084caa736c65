"""`hookmesh say`: text to a WAV file, through a TTS service or espeak-ng in process."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Annotated

import typer

from hookmesh.cli._app import app, host_port, run


@app.command()
def say(
    text: Annotated[str, typer.Argument(help="What to say.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="The WAV file to write.")],
    voice: Annotated[
        str, typer.Option(help="Voice, e.g. en-us or en-us+f3; the engine's default when empty.")
    ] = "",
    rate: Annotated[int, typer.Option(help="Words per minute (80-450); 0 for the default.")] = 0,
    target: Annotated[
        str | None,
        typer.Option(help="A TTS service (host:port); espeak-ng in this process when unset."),
    ] = None,
    timeout: Annotated[float, typer.Option(help="Seconds the synthesis may take.")] = 60.0,
) -> None:
    """Speak TEXT into a WAV file (16-bit PCM), streaming the audio to disk as it is made."""
    from hookmesh.client import AgentClientError, TTSClient
    from hookmesh.errors import HookmeshError
    from hookmesh.tts import TTSEngine, WavWriter

    async def speak() -> int:
        writer = WavWriter(output)
        try:
            async with asyncio.timeout(timeout):
                if target:
                    async with TTSClient(host_port(target, "--target"), timeout=timeout) as client:
                        async for chunk in client.synthesize(text, voice=voice, rate=rate):
                            writer.add_chunk(chunk)
                else:
                    async for chunk in TTSEngine().synthesize(text, voice=voice, rate=rate):
                        writer.add_chunk(chunk)
        except (AgentClientError, HookmeshError, TimeoutError) as exc:
            writer.discard()
            message = str(exc) or f"no audio within {timeout:g} s"
            reason = getattr(exc, "reason", "")
            if reason and f"[{reason}]" not in message:
                message += f" [{reason}]"
            print(f"error: {message}", file=sys.stderr)
            return 1
        if not writer.close():
            print("error: the engine produced no audio", file=sys.stderr)
            return 1
        pcm = writer.format
        assert pcm is not None
        print(f"wrote {output} ({writer.seconds:.2f} s, {pcm.sample_rate} Hz, {pcm.channels} ch)")
        return 0

    raise typer.Exit(run(speak()))
