"""`hookmesh chat`: talk to an agent service."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from hookmesh.cli._app import app, run


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
    from hookmesh.cli._printer import EventPrinter
    from hookmesh.client import AgentClient, AgentClientError
    from hookmesh.tts import SpeechRecorder, WavWriter

    printer = EventPrinter(as_json=as_json)

    async def talk() -> int:
        session_id = session
        async with AgentClient(target, timeout=timeout) as client:
            while True:
                text = message if message is not None else _prompt()
                if text is None:
                    return 0
                recorder = SpeechRecorder(WavWriter(speak)) if speak is not None else None
                paused: list[Any] = []
                try:
                    async for event in client.reply(text, session_id=session_id):
                        printer.show(event)
                        if recorder is not None:
                            recorder.add(event)
                        if event.type == "reply_start":
                            session_id = event.session_id
                        elif event.type == "require_user_confirm":
                            paused = event.tool_calls
                    if paused:
                        await _review(client, session_id, paused, printer.show)
                except AgentClientError as exc:
                    printer.console.print(f"[red]error: {exc}[/red]")
                    if recorder is not None:
                        recorder.writer.discard()
                    return 1
                if recorder is not None:
                    _save_speech(recorder)
                if message is not None:
                    return 0

    raise typer.Exit(run(talk()))


async def _review(client: Any, session_id: str, calls: list[Any], show: Any) -> None:
    """While the reply waits for confirmation, ask about each call (approve, edit its
    arguments, or reject with a reason) and resume; a refused edit is asked again. Prompts
    go to stderr (stdout may be JSON lines); at end of input the reply stays paused."""
    from hookmesh.agent import Confirmation
    from hookmesh.client import AgentClientError

    while calls:
        answers = []
        for call in calls:
            choice = _ask(f"{call.name} {call.arguments}: [a]pprove, [e]dit or [r]eject? ")
            while choice not in (None, "a", "e", "r"):
                choice = _ask("type a, e or r: ")
            if choice is None:
                return
            if choice == "r":
                reason = _ask("reason (the model reads it): ") or ""
                answers.append(Confirmation(call_id=call.id, confirmed=False, reason=reason))
                continue
            edited = _ask("arguments (a JSON object): ") if choice == "e" else None
            if choice == "e" and edited is None:
                return
            answers.append(Confirmation(call_id=call.id, confirmed=True, arguments=edited))
        paused: list[Any] = []
        try:
            async for event in client.resume(session_id, confirmations=answers):
                show(event)
                if event.type == "require_user_confirm":
                    paused = event.tool_calls
        except AgentClientError as exc:
            if exc.reason != "INVALID_SCHEMA":
                raise
            print(f"refused: {exc}", file=sys.stderr)
            continue
        calls = paused


def _ask(prompt: str) -> str | None:
    """One answer line (stripped, lowercased for single letters); None at end of input."""
    print(prompt, end="", file=sys.stderr, flush=True)
    line = sys.stdin.readline()
    if not line:
        return None
    answer = line.strip()
    return answer.lower() if len(answer) == 1 else answer


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
