"""The retrieval commands of `hookmesh`: serve, kb create/list/delete, ingest, search."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from hookmesh.cli._app import (
    TlsCaOption,
    TokenEnvOption,
    app,
    call_service,
    check_timeout,
    client_tls,
    die,
    token_from_env,
)

if TYPE_CHECKING:
    from hookmesh.client import IngestReport, RetrievalClient
    from hookmesh.retrieval import Document

DEFAULT_TARGET = "127.0.0.1:7002"
TEXT_SUFFIXES = {".txt": "text", ".text": "text", ".md": "markdown", ".markdown": "markdown"}
"""File types `hookmesh ingest` reads (UTF-8), by suffix."""

kb_app = typer.Typer(help="Manage knowledge bases on a retrieval service.", no_args_is_help=True)
app.add_typer(kb_app, name="kb")

Target = Annotated[str, typer.Option(help="Retrieval service address (host:port).")]
Timeout = Annotated[float, typer.Option(help="Seconds each call may take.")]


def _call(
    target: str,
    timeout: float,
    token_env: str | None,
    tls_ca: Path | None,
    work: Callable[[RetrievalClient], Awaitable[int]],
) -> NoReturn:
    """`call_service` on the retrieval service with `timeout` bounding each call, not the
    command: an ingest makes one call per batch."""
    from hookmesh.client import RetrievalClient

    check_timeout(timeout)
    token, tls = token_from_env(token_env), client_tls(tls_ca)
    open_client = partial(
        RetrievalClient, target, timeout=timeout, ingest_timeout=timeout, token=token, tls=tls
    )
    call_service(open_client, target, None, work, service="retrieval", tls=tls, timeout=timeout)


# -- knowledge bases -------------------------------------------------------------------------


@kb_app.command("create")
def kb_create(
    name: Annotated[str, typer.Argument(help="1-63 of a-z 0-9 _ -, starting with a letter.")],
    description: Annotated[str, typer.Option(help="What the base holds.")] = "",
    max_tokens: Annotated[int, typer.Option(help="Tokens per chunk; 0 for 128.")] = 0,
    overlap_tokens: Annotated[int, typer.Option(help="Overlap between chunks; 0 for 32.")] = 0,
    target: Target = DEFAULT_TARGET,
    timeout: Timeout = 30.0,
    token_env: TokenEnvOption = None,
    tls_ca: TlsCaOption = None,
) -> None:
    """Create an empty knowledge base."""

    async def work(client: RetrievalClient) -> int:
        kb = await client.create_knowledge_base(
            name, description, max_tokens=max_tokens, overlap_tokens=overlap_tokens
        )
        chunking = f"{kb.chunking.max_tokens}/{kb.chunking.overlap_tokens} tokens"
        print(f"created knowledge base {kb.name} (chunks {chunking}, embedder {kb.embedder})")
        return 0

    _call(target, timeout, token_env, tls_ca, work)


@kb_app.command("list")
def kb_list(
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
    target: Target = DEFAULT_TARGET,
    timeout: Timeout = 30.0,
    token_env: TokenEnvOption = None,
    tls_ca: TlsCaOption = None,
) -> None:
    """List knowledge bases with their document and chunk counts."""
    from rich.console import Console
    from rich.table import Table

    async def work(client: RetrievalClient) -> int:
        kbs = await client.list_knowledge_bases()
        if as_json:
            for kb in kbs:
                print(
                    json.dumps(
                        {
                            "name": kb.name,
                            "description": kb.description,
                            "documents": kb.document_count,
                            "chunks": kb.chunk_count,
                            "embedder": kb.embedder,
                            "create_time": kb.create_time.isoformat(),
                        }
                    )
                )
            return 0
        if not kbs:
            print("no knowledge bases")
            return 0
        table = Table("name", "documents", "chunks", "description")
        for kb in kbs:
            table.add_row(kb.name, str(kb.document_count), str(kb.chunk_count), kb.description)
        Console(highlight=False).print(table)
        return 0

    _call(target, timeout, token_env, tls_ca, work)


@kb_app.command("delete")
def kb_delete(
    name: Annotated[str, typer.Argument(help="The knowledge base.")],
    target: Target = DEFAULT_TARGET,
    timeout: Timeout = 30.0,
    token_env: TokenEnvOption = None,
    tls_ca: TlsCaOption = None,
) -> None:
    """Delete a knowledge base and everything in it."""

    async def work(client: RetrievalClient) -> int:
        await client.delete_knowledge_base(name)
        print(f"deleted knowledge base {name}")
        return 0

    _call(target, timeout, token_env, tls_ca, work)


# -- ingest -----------------------------------------------------------------------------------


def find_files(paths: list[Path]) -> tuple[list[tuple[str, Path]], list[Path]]:
    """``(document id, file)`` for every text or markdown file named or under a named
    directory (ids are paths relative to the argument's parent, so stable across runs), and
    the files skipped for their type."""
    found: dict[str, Path] = {}
    skipped: list[Path] = []
    for arg in paths:
        base = arg.resolve().parent
        files = sorted(p for p in arg.rglob("*") if p.is_file()) if arg.is_dir() else [arg]
        for file in files:
            if file.suffix.lower() in TEXT_SUFFIXES:
                found.setdefault(file.resolve().relative_to(base).as_posix(), file)
            elif not arg.is_dir() or not file.name.startswith("."):
                skipped.append(file)
    return sorted(found.items()), skipped


def read_document(document_id: str, path: Path) -> Document:
    """The document for a text or markdown file: title from its first ``#`` heading (else
    the file name), metadata ``title``, ``source`` and ``format``."""
    from hookmesh.retrieval import Document

    text = path.read_text(encoding="utf-8")
    kind = TEXT_SUFFIXES[path.suffix.lower()]
    title = path.stem
    if kind == "markdown":
        for line in text.splitlines():
            if line.startswith("# "):
                title = line[2:].strip() or title
                break
    return Document(document_id, text, {"title": title, "source": path.as_posix(), "format": kind})


def _batches(items: list[Any], size: int) -> Iterator[list[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


@app.command()
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Text or markdown files, or directories.")],
    kb: Annotated[str, typer.Option("--kb", help="The knowledge base to ingest into.")],
    batch: Annotated[
        int,
        typer.Option(
            help="Documents per Ingest call, each acknowledged durably (1: the bar moves per "
            "document; more is faster for many small files)."
        ),
    ] = 1,
    target: Target = DEFAULT_TARGET,
    timeout: Annotated[float, typer.Option(help="Seconds each Ingest call may take.")] = 600.0,
    token_env: TokenEnvOption = None,
    tls_ca: TlsCaOption = None,
) -> None:
    """Ingest text (.txt) and markdown (.md) files; ids are their relative paths.

    Re-ingesting a file replaces its document (unchanged files cost nothing). PDFs and other
    types are skipped with a note.
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    if batch < 1:
        die("--batch must be at least 1")
    missing = [p for p in paths if not p.exists()]
    if missing:
        die(f"no such file or directory: {missing[0]}")
    files, skipped = find_files(paths)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    for path in skipped:
        err.print(f"skipped {path}: only {', '.join(sorted(TEXT_SUFFIXES))} files are read")

    async def work(client: RetrievalClient) -> int:
        reports: list[IngestReport] = []
        unreadable = 0
        # NOTE(cli): a bar on a terminal only; elsewhere rich would still end it with a newline.
        with Progress(
            TextColumn("ingesting into [bold]{task.fields[kb]}[/bold]"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("documents, {task.fields[chunks]} chunks"),
            TimeElapsedColumn(),
            console=err,
            transient=True,
            disable=not err.is_terminal,
        ) as progress:
            task = progress.add_task("ingest", total=len(files), kb=kb, chunks=0)
            for group in _batches(files, batch):
                docs = []
                for doc_id, path in group:
                    try:
                        docs.append(read_document(doc_id, path))
                    except (OSError, UnicodeDecodeError) as exc:
                        unreadable += 1
                        err.print(f"[red]unreadable {path}: {exc}[/red]")
                reports.append(await client.ingest(kb, docs))
                written = sum(r.chunk_count for r in reports)
                progress.update(task, advance=len(group), chunks=written)
                progress.refresh()  # each document shows, however fast the next one comes
        failed = [e for r in reports for e in r.errors]
        for e in failed:
            err.print(f"[red]failed {e.document_id}: {e.message} [{e.reason}][/red]")
        stored = sum(r.ingested_count for r in reports)
        unchanged = sum(r.unchanged_count for r in reports)
        chunks = sum(r.chunk_count for r in reports)
        print(
            f"ingested {stored} documents into {kb} ({unchanged} unchanged, {chunks} chunks "
            f"written); {len(failed) + unreadable} failed, {len(skipped)} skipped"
        )
        return 1 if failed or unreadable else 0

    _call(target, timeout, token_env, tls_ca, work)


# -- search -----------------------------------------------------------------------------------


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="The question or keywords.")],
    kb: Annotated[
        list[str] | None, typer.Option("--kb", help="A knowledge base (repeat); all when unset.")
    ] = None,
    top_k: Annotated[int, typer.Option(help="Hits to show (1-50).")] = 5,
    mode: Annotated[str, typer.Option(help="hybrid, dense or lexical.")] = "hybrid",
    threshold: Annotated[
        float | None, typer.Option(help="Drop hits scoring below this (mode's own score).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON hit per line.")] = False,
    target: Target = DEFAULT_TARGET,
    timeout: Timeout = 30.0,
    token_env: TokenEnvOption = None,
    tls_ca: TlsCaOption = None,
) -> None:
    """Search knowledge bases; hits are ranked best first."""
    from rich.console import Console
    from rich.markup import escape

    from hookmesh.retrieval import SEARCH_MODES

    if mode not in SEARCH_MODES:
        die(f"--mode must be one of {', '.join(SEARCH_MODES)}")

    async def work(client: RetrievalClient) -> int:
        hits = await client.search(
            query,
            kb or [],
            top_k=top_k,
            mode=mode,
            score_threshold=threshold,  # type: ignore[arg-type]
        )
        if as_json:
            for hit in hits:
                print(
                    json.dumps(
                        {
                            "rank": hit.rank,
                            "score": hit.score,
                            "knowledge_base": hit.knowledge_base,
                            "document_id": hit.document_id,
                            "chunk_id": hit.chunk_id,
                            "text": hit.text,
                            "metadata": dict(hit.metadata),
                        },
                        ensure_ascii=False,
                    )
                )
            return 0
        console = Console(highlight=False, soft_wrap=True)
        if not hits:
            console.print("no hits")
        for hit in hits:
            where = escape(f"{hit.knowledge_base}/{hit.chunk_id}")
            console.print(f"[bold][{hit.rank}][/bold] {where} [dim]score {hit.score:.4f}[/dim]")
            console.print(f"    {escape(' '.join(hit.text.split()))}")
        return 0

    _call(target, timeout, token_env, tls_ca, work)
