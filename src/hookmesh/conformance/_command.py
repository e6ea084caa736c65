"""`hookmesh conformance`: check a sidecar against the conformance rules."""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Annotated

import typer

from hookmesh.conformance._runner import RuleResult, SetupError, run_conformance


def conformance(
    sidecar: Annotated[
        str, typer.Option(help="The sidecar under test: host:port or unix:///path.")
    ],
    token_env: Annotated[
        str | None,
        typer.Option(help="Send the bearer token held in this environment variable."),
    ] = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for each message.")] = 5.0,
    generic: Annotated[
        bool,
        typer.Option(
            "--generic",
            help="Check any sidecar for the rules every middleware obeys, from its Describe.",
        ),
    ] = False,
) -> None:
    """Check a sidecar serving the conformance middleware (docs/remote-protocol.md), or any
    sidecar with --generic.

    Prints one line per rule (PASS, or FAIL with why and the doc section) and a summary;
    exits 1 on any failure, 2 with one `error:` line when the sidecar cannot be checked.
    """
    token = None
    if token_env is not None:
        token = os.environ.get(token_env)
        if not token:
            raise typer.BadParameter(
                f"environment variable {token_env} is empty or unset", param_hint="--token-env"
            )

    def show(result: RuleResult) -> None:
        verdict = "PASS" if result.passed else "FAIL"
        detail = f"  {result.detail}" if result.detail else ""
        print(f"{verdict} {result.name}{detail}", flush=True)

    try:
        results = asyncio.run(
            run_conformance(sidecar, token=token, timeout=timeout, generic=generic, report=show)
        )
    except SetupError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        raise typer.Exit(2) from None
    failed = [r.name for r in results if not r.passed]
    print(f"{len(results) - len(failed)} passed, {len(failed)} failed")
    raise typer.Exit(1 if failed else 0)
