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
    check_timeout,
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


async def _error(exc: BaseException, address: str, timeout: float, tls: Any) -> int:
    """Print the one line for a failure (the service's, or espeak-ng's in this process, whose
    errors carry the same codes and reasons) and return the exit status."""
    from hookmesh.cli._errors import Callee, failure_line
    from hookmesh.client import AgentClientError
    from hookmesh.errors import HookmeshError, SchemaError

    if isinstance(exc, HookmeshError):
        violations = exc.violations if isinstance(exc, SchemaError) else []
        exc = AgentClientError(exc.code, exc.message, exc.reason, violations)
    if not isinstance(exc, AgentClientError):
        print(f"error: {exc or f'no audio within {timeout:g} s'}", file=sys.stderr)
        return 1
    callee = Callee(address, "TTS", timeout, alternative="use --local", tls=tls)
    line, code = await failure_line(exc, callee)
    print(line, file=sys.stderr)
    return code


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

    if not text.strip():
        die("give the text to say")
    if not output.parent.is_dir():
        die(f"--output: folder {output.parent} does not exist")
    check_timeout(timeout)
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
            return await _error(exc, address, timeout, tls)
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

    check_timeout(timeout)
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
            return await _error(exc, address, timeout, tls)
        for v in catalog.voices:
            languages = ", ".join(v.languages)
            print(f"{v.name:24s} {v.display_name:32s} {v.gender or '-':7s} {languages}")
        if catalog.variants:
            print(f"variants (append as voice+variant): {', '.join(catalog.variants)}")
        return 0

    raise typer.Exit(run(list_voices()))
