"""The conformance kit: the runner passes the Python and Node reference middlewares and names
the rule a broken sidecar breaks."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from hookmesh.conformance import run_conformance
from tests.node_process import NODE_DIR, node_binary
from tests.sdk_sidecars import listening
from tests.sidecar_process import sidecar_process

pytestmark = pytest.mark.timeout(120)

_RUN_TIMEOUT = 60.0


async def _command(*args: str) -> tuple[int, list[str]]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "hookmesh.cli",
        "conformance",
        *args,
        stdout=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(_RUN_TIMEOUT):
        out, _ = await process.communicate()
    return process.returncode or 0, out.decode().splitlines()


def _node_conformance(listen: str, *flags: str) -> Any:
    """The Node reference (clients/node/conformance.js) listening on `listen`."""
    return listening(node_binary(), str(NODE_DIR / "conformance.js"), *flags, listen=listen)


async def test_the_python_reference_passes_every_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONFORMANCE_TOKEN", "s3cret")
    async with sidecar_process(
        "hookmesh.conformance:ConformanceMiddleware", "--token-env", "CONFORMANCE_TOKEN"
    ) as sidecar:
        code, lines = await _command(
            "--sidecar", sidecar.address, "--token-env", "CONFORMANCE_TOKEN"
        )
    failed = [line for line in lines if line.startswith("FAIL")]
    assert failed == []
    assert code == 0
    names = {line.split()[1] for line in lines if line.startswith("PASS")}
    assert {"describe", "token_required", "on_model_call.stream[agentic]"} <= names
    assert lines[-1] == f"{len(names)} passed, 0 failed"


async def test_the_node_reference_passes_every_rule(tmp_path: Path) -> None:
    async with _node_conformance(f"unix://{tmp_path}/node.sock") as sidecar:
        results = await run_conformance(sidecar.address)
    assert [(r.name, r.detail) for r in results if not r.passed] == []
    assert len(results) > 40


async def test_a_broken_sidecar_fails_naming_the_rule() -> None:
    async with sidecar_process("tests.broken_conformance:IgnoresEmit") as sidecar:
        code, lines = await _command("--sidecar", sidecar.address, "--timeout", "2")
    failed = [line for line in lines if line.startswith("FAIL")]
    assert [line.split()[1] for line in failed] == [
        "on_reasoning.emit[flat]",
        "on_reasoning.emit[agentic]",
    ]
    assert "before call_next: emitted []" in failed[0]
    assert code == 1
    assert lines[-1].endswith("passed, 2 failed")


async def _command_err(*args: str) -> tuple[int, list[str], list[str]]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "hookmesh.cli",
        "conformance",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(_RUN_TIMEOUT):
        out, err = await process.communicate()
    return process.returncode or 0, out.decode().splitlines(), err.decode().splitlines()


async def test_a_sidecar_needing_a_token_gets_one_error_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CONFORMANCE_TOKEN", "s3cret")
    async with sidecar_process(
        "hookmesh.conformance:ConformanceMiddleware", "--token-env", "CONFORMANCE_TOKEN"
    ) as sidecar:
        code, out, err = await _command_err("--sidecar", sidecar.address)
    assert (code, out, err) == (2, [], ["error: the sidecar requires a token: pass --token-env"])


async def test_the_python_reference_passes_the_generic_rules() -> None:
    async with sidecar_process("hookmesh.conformance:ConformanceMiddleware") as sidecar:
        code, lines = await _command("--generic", "--sidecar", sidecar.address)
    assert [line for line in lines if line.startswith("FAIL")] == []
    names = {line.split()[1] for line in lines if line.startswith("PASS")}
    assert {"generic.describe", "generic.on_reply.answers", "generic.stream.cancel"} <= names
    assert code == 0


async def test_the_node_reference_passes_the_generic_rules(tmp_path: Path) -> None:
    async with _node_conformance(f"unix://{tmp_path}/node.sock") as sidecar:
        results = await run_conformance(sidecar.address, generic=True)
    assert [(r.name, r.detail) for r in results if not r.passed] == []
    assert len(results) >= 12


async def test_the_observing_references_pass_the_observe_rules(tmp_path: Path) -> None:
    """Python and Node, every onion hook observing: silent whatever the marker."""
    async with sidecar_process("hookmesh.conformance:ObservingConformanceMiddleware") as sidecar:
        code, lines = await _command("--sidecar", sidecar.address)
    assert [line for line in lines if line.startswith("FAIL")] == []
    names = {line.split()[1] for line in lines if line.startswith("PASS")}
    assert {"observe.describe", "observe.on_reply[flat]", "call_tool"} <= names
    assert code == 0
    async with _node_conformance(f"unix://{tmp_path}/node.sock", "--observe") as sidecar:
        results = await run_conformance(sidecar.address)
    assert [(r.name, r.detail) for r in results if not r.passed] == []
    assert len([r for r in results if r.name.startswith("observe.")]) == 13
