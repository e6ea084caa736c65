"""The Go sidecar SDK (clients/go): its generated code is current, and its audit example,
built with Debian's Go toolchain, chats through a real agent on both message kinds, passes
the conformance kit's generic rules (with and without a token) and drains on SIGTERM."""

from __future__ import annotations

import asyncio
import filecmp
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from hookmesh.conformance import run_conformance
from hookmesh.conformance._session import Session, invocation
from hookmesh.schema import MessageKind
from hookmesh.v1 import middleware_pb2 as pb
from hookmesh.v1 import middleware_pb2_grpc as pb_grpc
from tests.go_sidecar import GO_DIR, IMPORT_PATH, build, go, go_sidecar
from tests.sdk_sidecars import assert_audits_a_reply

pytestmark = pytest.mark.timeout(300)

_PROTOS = GO_DIR.parents[1] / "protos"


@pytest.fixture(scope="module")
def audit_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    gopath = tmp_path_factory.mktemp("gopath")
    return asyncio.run(build(gopath, "examples/audit", gopath / "audit"))


async def test_the_generated_go_code_is_current(tmp_path: Path) -> None:
    protos = sorted(str(p) for p in (_PROTOS / "hookmesh" / "v1").glob("*.proto"))
    process = await asyncio.create_subprocess_exec(
        "protoc", f"-I{_PROTOS}", f"--go_out={tmp_path}", f"--go-grpc_out={tmp_path}", *protos,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    fresh = tmp_path / "github.com/hookmesh/hookmesh/clients/go/hookmeshv1"
    names = sorted(p.name for p in fresh.iterdir())
    assert names == sorted(p.name for p in (GO_DIR / "hookmeshv1").iterdir())
    _, mismatch, errors = filecmp.cmpfiles(fresh, GO_DIR / "hookmeshv1", names, shallow=False)
    assert (mismatch, errors) == ([], []), "regenerate clients/go/hookmeshv1 with protoc"


async def test_the_audit_example_reports_each_reply_through_a_real_agent(
    audit_binary: Path, kind: MessageKind
) -> None:
    async with go_sidecar(audit_binary) as sidecar:
        await assert_audits_a_reply(sidecar, kind)


async def test_the_audit_example_passes_the_generic_rules_with_a_token(
    audit_binary: Path,
) -> None:
    env = {"AUDIT_TOKEN": "s3"}
    async with go_sidecar(audit_binary, "--token-env", "AUDIT_TOKEN", env=env) as sidecar:
        results = await run_conformance(sidecar.address, token="s3", generic=True, timeout=3)
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "hookmesh.cli", "conformance", "--generic",
            "--sidecar", sidecar.address,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await process.communicate()
    assert [(r.name, r.detail) for r in results if not r.passed] == []
    assert {"generic.on_reply.answers", "token_required"} <= {r.name for r in results}
    assert (process.returncode, out, err.decode().splitlines()) == (
        2, b"", ["error: the sidecar requires a token: pass --token-env"],
    )  # fmt: skip


@pytest.fixture
async def stub(audit_binary: Path) -> AsyncIterator[tuple[object, pb_grpc.MiddlewareServiceStub]]:
    async with (
        go_sidecar(audit_binary, "--grace", "30s") as sidecar,
        grpc.aio.insecure_channel(sidecar.address) as channel,
    ):
        yield sidecar, pb_grpc.MiddlewareServiceStub(channel)


async def test_sigterm_drains_the_stream_once_its_invocation_ends(
    stub: tuple[object, pb_grpc.MiddlewareServiceStub],
) -> None:
    """The open invocation is served to its end, then the stream ends OK and the process
    exits: the agent never needs to half-close (docs/remote-protocol.md § Connecting)."""
    sidecar, channel_stub = stub
    session = Session(channel_stub, (), 5.0)
    try:
        await session.send(invocation("1", pb.HOOK_ON_REPLY, "flat", reply=pb.ReplyArgs()))
        await session.expect("1", "call_next")
        sidecar.process.send_signal(signal.SIGTERM)  # type: ignore[attr-defined]
        await session.silence(0.3, "the open invocation is still served")
        assert sidecar.process.returncode is None  # type: ignore[attr-defined]
        await session.send(
            pb.InterceptRequest(
                invocation_id="1", outcome=pb.DownstreamOutcome(stream_end=pb.StreamEnd())
            )
        )
        await session.expect("1", "done")
        async with asyncio.timeout(5):
            await session.reader
            assert await session.call.code() == grpc.StatusCode.OK
            assert await sidecar.process.wait() == 0  # type: ignore[attr-defined]
    finally:
        session.cancel()


async def test_the_sdk_s_own_go_tests_pass(tmp_path: Path) -> None:
    """clients/go/sidecar/stream_test.go: End (the unasked done) from a timer goroutine or
    an onItem callback ends a blocked next with ErrEnded, nothing sent after the done;
    PassRest answers its item with a final verdict (keeping the drop), then nothing."""
    output = await go(tmp_path, "test", "-v", f"{IMPORT_PATH}/sidecar")
    assert "--- PASS: TestEndFromAnotherGoroutineEndsABlockedNext" in output
    assert "--- PASS: TestEndInOnItemReplacesTheVerdict" in output
    for passing in (
        "TestPassRestInOnItemSendsAFinalVerdict",
        "TestPassRestKeepsTheDrop",
        "TestVerdictsAreNotFinalWithoutPassRest",
        "TestPassRestSendsNothingWhenObserved",
    ):
        assert f"--- PASS: {passing}" in output


@pytest.fixture(scope="module")
def conformance_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    gopath = tmp_path_factory.mktemp("gopath")
    return asyncio.run(build(gopath, "examples/conformance", gopath / "conformance"))


@pytest.mark.parametrize(
    ("generic", "observe"),
    [(False, False), (True, False), (False, True), (True, True)],
    ids=["conformance", "generic", "observing", "observing-generic"],
)
async def test_the_go_conformance_reference_passes_every_rule(
    conformance_binary: Path, generic: bool, observe: bool
) -> None:
    env = {"CONFORMANCE_TOKEN": "s3"}
    flags = ("--observe",) if observe else ()
    async with go_sidecar(
        conformance_binary, "--token-env", "CONFORMANCE_TOKEN", *flags, env=env
    ) as sidecar:
        results = await run_conformance(sidecar.address, token="s3", generic=generic, timeout=3)
    assert [(r.name, r.detail) for r in results if not r.passed] == []
    observed = [r for r in results if r.name.startswith("observe.")]
    assert len(observed) == (13 if observe and not generic else 0)
    assert len(results) > (12 if generic or observe else 70)
