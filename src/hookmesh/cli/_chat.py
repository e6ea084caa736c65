"""`hookmesh chat`: talk to an agent service (flags, output and exit codes as Node's chat.js)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

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

if TYPE_CHECKING:
    from hookmesh.cli._printer import EventPrinter
    from hookmesh.client import AgentClient

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_INTERRUPTED = 130


@app.command()
def chat(
    message: Annotated[
        str | None, typer.Argument(help="One message; omit for an interactive chat.")
    ] = None,
    target: Annotated[str, typer.Option(help="Agent service address.")] = "127.0.0.1:7000",
    session: Annotated[
        str,
        typer.Option(
            help="Continue this session (an error when there is none: see --new-session); a "
            "new session when empty."
        ),
    ] = "",
    new_session: Annotated[
        bool,
        typer.Option(
            "--new-session", help="Start the session --session names (an error if it exists)."
        ),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print each event as one JSON line (docs/chat.md).")
    ] = False,
    timeout: Annotated[float, typer.Option(help="Seconds a reply may take.")] = 300.0,
    token_env: TokenEnvOption = None,
    tls_ca: TlsCaOption = None,
    max_iters: Annotated[
        int, typer.Option(help="Most reasoning steps; 0 for the agent's setting.")
    ] = 0,
    tool_choice: Annotated[
        str, typer.Option(help="auto, none, required or a tool name; empty for auto.")
    ] = "",
    model: Annotated[
        str, typer.Option(help="A configured model, if the server allows overrides.")
    ] = "",
    speak: Annotated[
        Path | None,
        typer.Option(
            help="Save each reply's speech (its audio/pcm data blocks, e.g. from the TTS "
            "middleware) to this WAV file."
        ),
    ] = None,
    attach: Annotated[
        str,
        typer.Option(
            help="Follow this session's running (or last) reply from its start, on "
            "whichever replica runs it, instead of sending a message."
        ),
    ] = "",
    durability: Annotated[
        str,
        typer.Option(
            help="When the reply is saved: step, event or exit (docs/durability.md); empty "
            "for the agent's setting."
        ),
    ] = "",
    output_schema: Annotated[
        Path | None,
        typer.Option(
            help="Ask for a structured answer valid for the JSON Schema in this file (named "
            "after it); the answer is printed as [output NAME] json before the end."
        ),
    ] = None,
) -> None:
    """Talk to an agent service: text streams as it arrives, tools and middlewares compactly.

    Exit status: 0 when the reply ends (completed, paused, interrupted or out of steps), 1
    when the call or the reply fails, 2 on bad usage, 130 on Ctrl-C.
    """
    from hookmesh.cli._errors import Callee
    from hookmesh.cli._printer import EventPrinter
    from hookmesh.client import AgentClient, AgentClientError

    if message is not None and not message.strip():
        die("give the message to send (or omit it for an interactive chat)")
    if max_iters < 0 or max_iters > 1000:
        die("--max-iters must be between 0 and 1000")
    if speak is not None and not speak.parent.is_dir():
        die(f"--speak: folder {speak.parent} does not exist")
    if durability not in ("", "step", "event", "exit"):
        die("--durability must be step, event or exit")
    if attach and message is not None:
        die("--attach follows a reply: give no message with it")
    if attach and (session or new_session):
        die("--attach names the session: give no --session or --new-session with it")
    check_timeout(timeout)
    address = host_port(target, "--target")
    token = token_from_env(token_env)
    tls = client_tls(tls_ca)
    options: dict[str, Any] = {
        "max_iters": max_iters,
        "tool_choice": tool_choice,
        "model": model,
        "durability": durability,
    }
    if output_schema is not None:
        options["output"] = _output(output_schema)
    printer = EventPrinter(as_json=as_json)
    state = {"session": attach or session}
    callee = Callee(address, "agent", timeout, tls=tls)

    async def talk() -> int:
        async with AgentClient(address, timeout=timeout, token=token, tls=tls) as client:
            try:
                if session:
                    await _check_session(client, session, new_session)
            except AgentClientError as exc:
                return await _fail(exc, callee)
            if attach:
                return await _turn(client, printer, None, state, options, speak, callee)
            if message is not None:
                return await _turn(client, printer, message, state, options, speak, callee)
            status = EXIT_OK
            while (text := _prompt()) is not None:
                status = await _turn(client, printer, text, state, options, speak, callee)
            return status

    try:
        code = run(talk())
    except KeyboardInterrupt:
        hint = _interrupted_hint(state["session"], durability)
        print(f"interrupted{hint}", file=sys.stderr)
        code = EXIT_INTERRUPTED
    raise typer.Exit(code)


def _interrupted_hint(session_id: str, durability: str) -> str:
    """What Ctrl-C leaves behind: a durable reply goes on (follow it), an ``exit`` one was
    interrupted with the call (continue the session)."""
    if not session_id:
        return ""
    if durability == "exit":
        return f"; continue with --session {session_id}"
    return (
        f"; the reply goes on: follow it with --attach {session_id}, or continue with "
        f"--session {session_id}"
    )


async def _check_session(client: AgentClient, session_id: str, new: bool) -> None:
    """Refuse a --session that does not exist (a typo would start a new conversation) unless
    --new-session asks for it, and one that does with --new-session.

    Raises:
        AgentClientError: NOT_FOUND ``SESSION_NOT_FOUND``; ALREADY_EXISTS ``SESSION_EXISTS``.
    """
    import grpc

    from hookmesh.client import AgentClientError

    try:
        await client.get_session(session_id)
    except AgentClientError as exc:
        if new and exc.code == grpc.StatusCode.NOT_FOUND:
            return
        raise
    if new:
        raise AgentClientError(
            grpc.StatusCode.ALREADY_EXISTS,
            f"session {session_id} already exists",
            "SESSION_EXISTS",
        )


async def _fail(exc: Any, callee: Any) -> int:
    """Print the one line for a failed call; its exit status."""
    from hookmesh.cli._errors import failure_line

    line, code = await failure_line(exc, callee)
    print(line, file=sys.stderr)
    return code


async def _turn(
    client: AgentClient,
    printer: EventPrinter,
    text: str | None,
    state: dict[str, str],
    options: dict[str, Any],
    speak: Path | None,
    callee: Any,
) -> int:
    """One message and its reply (or, with no text, the session's latest reply followed);
    the status chat.js would exit with."""
    from hookmesh.client import AgentClientError
    from hookmesh.schema import is_nested
    from hookmesh.tts import SpeechRecorder, WavWriter

    recorder = SpeechRecorder(WavWriter(speak)) if speak is not None else None
    end = None
    paused: list[Any] = []
    external: list[Any] = []
    try:
        events = (
            client.watch(state["session"])
            if text is None
            else client.reply(text, session_id=state["session"], **options)
        )
        async for event in events:
            printer.show(event)
            if recorder is not None:
                recorder.add(event)
            if is_nested(event):
                continue  # a sub-agent's start, pause or end is not the reply's
            if event.type == "reply_start":
                state["session"] = event.session_id
            elif event.type == "require_user_confirm":
                paused = event.tool_calls
            elif event.type == "require_external_execution":
                external = event.tool_calls
            elif event.type == "reply_end":
                end = event
        if paused or external:
            pending = (paused, external)
            end = await _review(client, state["session"], pending, printer.show, callee) or end
    except AgentClientError as exc:
        printer.flush()
        if recorder is not None:
            recorder.writer.discard()
        return await _fail(exc, callee)
    if recorder is not None:
        _save_speech(recorder)
    if end is None:
        print("error: the stream closed without reply_end", file=sys.stderr)
        return EXIT_ERROR
    if end.error is not None:
        print(f"error: {end.error.reason}: {end.error.message}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK


async def _review(
    client: Any, session_id: str, pending: tuple[list[Any], list[Any]], show: Any, callee: Any
) -> Any:
    """While the reply waits for the user, answer it and resume, until it waits no more:
    for confirmations (the first of `pending`), ask about each call (approve, edit its
    arguments, or reject with a reason), a refused edit asked again; for external calls
    (the second), ask for each call's result. Prompts go to stderr (stdout may be JSON
    lines); at end of input the reply stays paused."""
    from hookmesh.cli._errors import failure_line
    from hookmesh.client import AgentClientError
    from hookmesh.schema import is_nested

    end = None
    confirm, external = pending
    while confirm or external:
        answers = _confirmations(confirm) if confirm else _results(external)
        if answers is None:
            return end
        paused: list[Any] = []
        waiting: list[Any] = []
        kind = "confirmations" if confirm else "external_results"
        try:
            async for event in client.resume(session_id, **{kind: answers}):
                show(event)
                if is_nested(event):
                    continue
                if event.type == "require_user_confirm":
                    paused = event.tool_calls
                elif event.type == "require_external_execution":
                    waiting = event.tool_calls
                elif event.type == "reply_end":
                    end = event
        except AgentClientError as exc:
            if exc.reason != "INVALID_SCHEMA":
                raise
            line, _ = await failure_line(exc, callee)
            print(f"refused: {line.removeprefix('error: ')}", file=sys.stderr)
            continue
        confirm, external = paused, waiting
    return end


def _confirmations(calls: list[Any]) -> list[Any] | None:
    """The user's answer to each call awaiting confirmation; None at end of input."""
    from hookmesh.agent import Confirmation

    answers = []
    for call in calls:
        choice = _ask(
            f"{_asker(call)}{call.name} {call.arguments}: [a]pprove, [e]dit or [r]eject? "
        )
        while choice not in (None, "a", "e", "r"):
            choice = _ask("type a, e or r: ")
        if choice is None:
            return None
        if choice == "r":
            reason = _ask("reason (the model reads it): ") or ""
            answers.append(Confirmation(call_id=call.id, confirmed=False, reason=reason))
            continue
        edited = _ask("arguments (a JSON object): ") if choice == "e" else None
        if choice == "e" and edited is None:
            return None
        answers.append(Confirmation(call_id=call.id, confirmed=True, arguments=edited))
    return answers


def _results(calls: list[Any]) -> list[Any] | None:
    """The user's result for each call awaiting external execution (a sub-agent's, passed up
    as ``external_<name>``, is asked as the tool it stands for, with who asks); a line
    starting with ``!`` is an error result. None at end of input."""
    import json

    from hookmesh.agent import ExternalResult

    answers = []
    for call in calls:
        tool, arguments = call.name, call.arguments
        if _asker(call):
            spec = json.loads(call.arguments)
            tool, arguments = spec["tool"], spec["arguments"]
        line = _ask(
            f"{_asker(call)}{tool} {arguments or '{}'}: its result ('!' first: an error)? ", False
        )
        if line is None:
            return None
        failed = line.startswith("!")
        output = line.removeprefix("!").strip() if failed else line
        answers.append(
            ExternalResult(call_id=call.id, output=output, state="error" if failed else "success")
        )
    return answers


def _asker(call: Any) -> str:
    """``asked by a/b: `` when `call` stands for a sub-agent's ask (a confirmation, or an
    external call passed up); empty for the reply's own call."""
    from hookmesh.schema import asked_by

    path = asked_by(call)
    return f"asked by {'/'.join(path)}: " if path else ""


def _ask(prompt: str, fold: bool = True) -> str | None:
    """One answer line (stripped; single letters lowercased, unless not `fold`); None at end
    of input."""
    print(prompt, end="", file=sys.stderr, flush=True)
    line = sys.stdin.readline()
    if not line:
        return None
    answer = line.strip()
    return answer.lower() if fold and len(answer) == 1 else answer


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


def _output(path: Path) -> Any:
    """The output schema in `path`, named after the file: exits 2 (a usage error) when the file
    holds no JSON object or the schema is refused."""
    import json
    import re

    from hookmesh.agent import output_spec
    from hookmesh.errors import SchemaError

    try:
        schema = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        die(f"--output-schema: cannot read a JSON Schema from {path}: {exc}")
    if not isinstance(schema, dict):
        die(f"--output-schema: {path} holds no JSON object")
    name = re.sub(r"[^A-Za-z0-9_-]", "_", path.stem)[:64] or "output"
    try:
        return output_spec(schema, name=name, field="output_schema")
    except SchemaError as exc:  # as the service would refuse it (chat.js asks it)
        die(f"{exc.reason}: {exc.message}")


def _prompt() -> str | None:
    """The next line typed; None at end of input or ``/quit``. Empty lines are skipped."""
    while True:
        try:
            line = input("you> ")
        except EOFError:
            return None
        if line.strip() in ("/quit", "/exit"):
            return None
        if line.strip():
            return line
