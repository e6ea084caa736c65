"""`hookmesh say` (text to a WAV file) and `hookmesh voices`, through a TTS service or
espeak-ng in this process."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from hookmesh.cli._app import (
    TlsCaOption,
    TokenEnvOption,
    app,
    client_tls,
    die,
    host_port,
    run,
    token_from_env,
)

DEFAULT_TARGET = "127.0.0.1:7003"
Target = Annotated[str, typer.Option(help="TTS service address (host:port).")]
Local = Annotated[
    bool, typer.Option("--local", help="Use espeak-ng in this process instead of a service.")
]


def _error(exc: BaseException, timeout: float) -> int:
    message = str(exc) or f"no audio within {timeout:g} s"
    reason = getattr(exc, "reason", "")
    if reason and f"[{reason}]" not in message:
        message += f" [{reason}]"
    print(f"error: {message}", file=sys.stderr)
    return 1


@app.command()
def say(
    text: Annotated[str, typer.Argument(help="What to say.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="The WAV file to write.")],
    voice: Annotated[
        str, typer.Option(help="Voice, e.g. en-us or en-us+f3; the engine's default when empty.")
    ] = "",
    rate: Annotated[int, typer.Option(help="Words per minute (80-450); 0 for the default.")] = 0,
    target: Target = DEFAULT_TARGET,
    local: Local = False,
    timeout: Annotated[float, typer.Option(help="Seconds the synthesis may take.")] = 60.0,
    token_env: TokenEnvOption = None,
    tls_ca: TlsCaOption = None,
) -> None:
    """Speak TEXT into a WAV file (16-bit PCM), streaming the audio to disk as it is made."""
    from hookmesh.client import AgentClientError, TTSClient
    from hookmesh.errors import HookmeshError
    from hookmesh.tts import TTSEngine, WavWriter

    if not output.parent.is_dir():
        die(f"--output: folder {output.parent} does not exist")
    address = host_port(target, "--target")
    token = token_from_env(token_env)
    tls = client_tls(tls_ca)

    async def speak() -> int:
        writer = WavWriter(output)
        try:
            async with asyncio.timeout(timeout):
                if local:
                    async for chunk in TTSEngine().synthesize(text, voice=voice, rate=rate):
                        writer.add_chunk(chunk)
                else:
                    async with TTSClient(address, timeout=timeout, token=token, tls=tls) as client:
                        async for chunk in client.synthesize(text, voice=voice, rate=rate):
                            writer.add_chunk(chunk)
        except (AgentClientError, HookmeshError, TimeoutError, OSError) as exc:
            writer.discard()
            return _error(exc, timeout)
        if not writer.close():
            print("error: the engine produced no audio", file=sys.stderr)
            return 1
        pcm = writer.format
        assert pcm is not None
        print(f"wrote {output} ({writer.seconds:.2f} s, {pcm.sample_rate} Hz, {pcm.channels} ch)")
        return 0

    raise typer.Exit(run(speak()))


@app.command()
def voices(
    language: Annotated[str, typer.Option(help="Only voices speaking this, e.g. en.")] = "",
    target: Target = DEFAULT_TARGET,
    local: Local = False,
    timeout: Annotated[float, typer.Option(help="Seconds the call may take.")] = 30.0,
    token_env: TokenEnvOption = None,
    tls_ca: TlsCaOption = None,
) -> None:
    """List the voices `say` and the TTS middleware can use."""
    from hookmesh.client import AgentClientError, TTSClient
    from hookmesh.errors import HookmeshError
    from hookmesh.tts import TTSEngine

    address = host_port(target, "--target")
    token = token_from_env(token_env)
    tls = client_tls(tls_ca)

    async def list_voices() -> int:
        catalog: Any
        try:
            async with asyncio.timeout(timeout):
                if local:
                    catalog = await TTSEngine().list_voices(language)
                else:
                    async with TTSClient(address, timeout=timeout, token=token, tls=tls) as client:
                        catalog = await client.list_voices(language=language)
        except (AgentClientError, HookmeshError, TimeoutError, OSError) as exc:
            return _error(exc, timeout)
        for v in catalog.voices:
            languages = ", ".join(v.languages)
            print(f"{v.name:24s} {v.display_name:32s} {v.gender or '-':7s} {languages}")
        if catalog.variants:
            print(f"variants (append as voice+variant): {', '.join(catalog.variants)}")
        return 0

    raise typer.Exit(run(list_voices()))
