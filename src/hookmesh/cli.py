"""The `hookmesh` command."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console

# NOTE(hookmesh): the suite forks processes (sidecars, espeak-ng) from a process that runs
# gRPC; its fork handlers can abort the child, and nothing here relies on them.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

app = typer.Typer(
    name="hookmesh",
    help="An agent runtime whose every customisation is a middleware, local or remote.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def _root() -> None:
    """hookmesh: agents whose every customisation is a middleware."""


def _host_port(listen: str) -> str:
    host, sep, port = listen.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise typer.BadParameter(f"{listen!r} is not host:port (port 0 picks a free one)")
    return listen


def _token(env_name: str | None) -> str | None:
    if env_name is None:
        return None
    token = os.environ.get(env_name)
    if not token:
        raise typer.BadParameter(
            f"environment variable {env_name} is empty or unset", param_hint="--token-env"
        )
    return token


@app.command()
def sidecar(
    middleware: Annotated[
        str, typer.Option(help="The middleware to serve, as package.module:attribute.")
    ],
    listen: Annotated[
        str,
        typer.Option(help="host:port (port 0 picks a free one), or unix:///path for a socket."),
    ] = "127.0.0.1:7001",
    tls_cert: Annotated[
        Path | None, typer.Option(help="Server certificate chain (PEM): serve TLS.")
    ] = None,
    tls_key: Annotated[Path | None, typer.Option(help="Server private key (PEM).")] = None,
    client_ca: Annotated[
        Path | None, typer.Option(help="Require client certificates signed by this CA (mTLS).")
    ] = None,
    token_env: Annotated[
        str | None, typer.Option(help="Require the bearer token held in this environment variable.")
    ] = None,
    app_dir: Annotated[Path, typer.Option(help="Directory to import the middleware from.")] = Path(
        "."
    ),
) -> None:
    """Serve one in-process middleware as a MiddlewareService sidecar.

    Prints `listening on HOST:PORT` once it accepts calls; stops gracefully on SIGTERM/SIGINT.
    """
    from hookmesh.remote import ServerTLS, load_middleware, serve_middleware
    from hookmesh.services._server import DEFAULT_GRACE, wait_for_signal

    address = listen if listen.startswith("unix:") else _host_port(listen)
    if (tls_cert is None) != (tls_key is None):
        raise typer.BadParameter("--tls-cert and --tls-key go together")
    if client_ca is not None and tls_cert is None:
        raise typer.BadParameter("--client-ca needs --tls-cert and --tls-key")
    tls = ServerTLS(tls_cert, tls_key, client_ca) if tls_cert and tls_key else None
    token = _token(token_env)
    sys.path.insert(0, str(app_dir.resolve()))
    try:
        mw = load_middleware(middleware)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--middleware") from None

    async def run() -> None:
        running = await serve_middleware(mw, address, tls=tls, token=token)
        host = address.rpartition(":")[0]
        bound = address if address.startswith("unix:") else f"{host}:{running.port}"
        print(f"listening on {bound}", flush=True)
        logging.getLogger("hookmesh.sidecar").info("serving %s", mw.middleware_key())
        try:
            await wait_for_signal()
        finally:
            await running.stop(DEFAULT_GRACE)

    _run(run())


serve_app = typer.Typer(help="Run one service.", no_args_is_help=True)
app.add_typer(serve_app, name="serve")

ConfigOption = Annotated[
    Path | None, typer.Option("--config", "-c", help="YAML config file (see docs/config.md).")
]


def _config(path: Path | None, **overrides: Any) -> Any:
    from hookmesh.services.agent import load_config

    try:
        return load_config(path, **{k: v for k, v in overrides.items() if v is not None})
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--config") from None


def serve_service(
    load: Callable[..., Any],
    start: Callable[[Any], Awaitable[Any]],
    config: Path | None,
    listen: str | None,
    label: str,
) -> NoReturn:
    """Load a service's config (bad files are usage errors), serve until a signal, exit."""
    from hookmesh.services._server import serve_until_signal

    try:
        settings = load(config, **({"listen": _host_port(listen)} if listen else {}))
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--config") from None
    serving = serve_until_signal(
        lambda: start(settings), listen=settings.listen, label=label, grace=settings.grace_seconds
    )
    raise typer.Exit(_run(serving))


@serve_app.command("agent")
def serve_agent(
    config: ConfigOption = None,
    listen: Annotated[
        str | None, typer.Option(help="Address; overrides the config's listen.")
    ] = None,
) -> None:
    """Serve the agent service (sessions in SQLite) until SIGTERM/SIGINT."""
    from hookmesh.services.agent import load_config, start_agent_service

    serve_service(load_config, start_agent_service, config, listen, "agent service ")


@serve_app.command("tts")
def serve_tts(
    config: Annotated[
        Path | None,
        typer.Option("--config", "-c", help="YAML config file (see docs/services/tts.md)."),
    ] = None,
    listen: Annotated[
        str | None, typer.Option(help="Address; overrides the config's listen.")
    ] = None,
) -> None:
    """Serve text to speech (espeak-ng, streamed as produced) until SIGTERM/SIGINT."""
    from hookmesh.services.tts import load_tts_config, start_tts_service

    serve_service(load_tts_config, start_tts_service, config, listen, "tts service ")


@app.command()
def up(
    config: ConfigOption = None,
    listen: Annotated[str | None, typer.Option(help="Agent service address.")] = None,
) -> None:
    """Start the whole suite on loopback (services, sidecars, then the agent); Ctrl-C stops it."""
    from hookmesh._suite import start_suite
    from hookmesh.services._server import wait_for_signal

    settings = _config(config, listen=listen and _host_port(listen))

    async def run() -> None:
        async with start_suite(settings) as suite:
            console = Console()
            console.print(f"agent service  [bold]{suite.agent_address}[/bold]")
            for name, address in suite.services.items():
                console.print(f"{name} service  [bold]{address}[/bold]")
            for name, address in suite.sidecars.items():
                console.print(f"sidecar {name:7s}[bold]{address}[/bold]")
            console.print("[dim]Ctrl-C stops everything.[/dim]")
            await wait_for_signal()
            console.print("[dim]stopping…[/dim]")

    _run(run())


@app.command()
def chat(
    message: Annotated[
        str | None, typer.Argument(help="One message; omit for an interactive chat.")
    ] = None,
    target: Annotated[str, typer.Option(help="Agent service address.")] = "127.0.0.1:7000",
    session: Annotated[str, typer.Option(help="Session id; a new session when empty.")] = "",
    as_json: Annotated[bool, typer.Option("--json", help="Print events as JSON lines.")] = False,
    timeout: Annotated[float, typer.Option(help="Seconds a reply may take.")] = 300.0,
    speak: Annotated[
        Path | None,
        typer.Option(
            help="Save each reply's speech (its audio/pcm data blocks, e.g. from the TTS "
            "middleware) to this WAV file."
        ),
    ] = None,
) -> None:
    """Talk to an agent service: text streams as it arrives, tools and middlewares compactly."""
    from hookmesh._console import EventPrinter
    from hookmesh.client import AgentClient, AgentClientError
    from hookmesh.services.tts import SpeechRecorder, WavWriter

    printer = EventPrinter(as_json=as_json)

    async def run() -> int:
        session_id = session
        async with AgentClient(target, timeout=timeout) as client:
            while True:
                text = message if message is not None else _prompt()
                if text is None:
                    return 0
                recorder = SpeechRecorder(WavWriter(speak)) if speak is not None else None
                try:
                    async for event in client.reply(text, session_id=session_id):
                        printer.show(event)
                        if recorder is not None:
                            recorder.add(event)
                        if event.type == "reply_start":
                            session_id = event.session_id
                except AgentClientError as exc:
                    printer.console.print(f"[red]error: {exc}[/red]")
                    if recorder is not None:
                        recorder.writer.discard()
                    return 1
                if recorder is not None:
                    _save_speech(recorder)
                if message is not None:
                    return 0

    raise typer.Exit(_run(run()))


def _save_speech(recorder: Any) -> None:
    """Finish a reply's WAV file; notes go to stderr (stdout may be JSON lines)."""
    writer = recorder.writer
    if writer.close():
        note = f"speech: {writer.seconds:.2f} s saved to {writer.path}"
    else:
        note = "speech: the reply carried no audio/pcm data blocks (is a TTS middleware on?)"
    if recorder.skipped:
        note += f" ({recorder.skipped} audio block(s) of another shape skipped)"
    print(note, file=sys.stderr)


def _prompt() -> str | None:
    try:
        line = input("you> ")
    except EOFError:
        return None
    return line if line.strip() not in ("", "/quit", "/exit") else None


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
    from hookmesh.client import AgentClientError
    from hookmesh.errors import HookmeshError
    from hookmesh.services.tts import WavWriter

    async def run() -> int:
        writer = WavWriter(output)
        try:
            async with asyncio.timeout(timeout):
                if target:
                    from hookmesh.client._tts_client import TTSClient

                    async with TTSClient(_host_port(target), timeout=timeout) as client:
                        async for chunk in client.synthesize(text, voice=voice, rate=rate):
                            writer.add_chunk(chunk)
                else:
                    from hookmesh.services.tts import TTSEngine

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

    raise typer.Exit(_run(run()))


@app.command()
def demo() -> None:
    """Run the suite with the embedded demo config and two conversations, then stop."""
    from hookmesh.demo import run_demo

    raise typer.Exit(_run(run_demo(Console(highlight=False))))


def _setup_tracing() -> None:
    """Export spans over OTLP when the standard OTEL_EXPORTER_OTLP_ENDPOINT is set."""
    if not os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        return
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    name = os.environ.get("OTEL_SERVICE_NAME", "hookmesh")
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)


def _run(coro: Any) -> Any:
    logging.basicConfig(level=os.environ.get("HOOKMESH_LOG_LEVEL", "WARNING"), stream=sys.stderr)
    _setup_tracing()
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


def main() -> None:
    """Entry point of the `hookmesh` script."""
    app()


def _register_domain_commands() -> None:
    from hookmesh._cli_memory import memory_app, serve_memory
    from hookmesh._cli_retrieval import register as register_retrieval

    register_retrieval(app, serve_app)  # serve retrieval, kb, ingest, search
    from hookmesh.conformance import conformance_command

    app.command("conformance")(conformance_command)
    app.add_typer(memory_app, name="memory")
    serve_app.command("memory")(serve_memory)


_register_domain_commands()


if __name__ == "__main__":
    main()
