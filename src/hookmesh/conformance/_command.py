"""`hookmesh conformance`: check a sidecar against the conformance rules."""

from __future__ import annotations

import asyncio
import os
from typing import Annotated

import typer

from hookmesh.conformance._runner import RuleResult, run_conformance


def conformance(
    sidecar: Annotated[
        str, typer.Option(help="The sidecar under test: host:port or unix:///path.")
    ],
    token_env: Annotated[
        str | None,
        typer.Option(help="Send the bearer token held in this environment variable."),
    ] = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for each message.")] = 5.0,
) -> None:
    """Check a sidecar serving the conformance middleware (docs/remote-protocol.md).

    Prints one line per rule (PASS or FAIL with why) and a summary; exits 1 on any failure.
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

    results = asyncio.run(run_conformance(sidecar, token=token, timeout=timeout, report=show))
    failed = [r.name for r in results if not r.passed]
    print(f"{len(results) - len(failed)} passed, {len(failed)} failed")
    raise typer.Exit(1 if failed else 0)
