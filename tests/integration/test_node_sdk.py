"""The Node sidecar SDK (clients/node/lib/sdk.js): its audit example chats through a real
agent on both message kinds, passes the conformance kit's generic rules (with a token) and
drains on SIGTERM (cutting what is still open at the grace's end); inv.end() sends the
unasked done."""

from __future__ import annotations

import asyncio
import signal
from typing import Any

import grpc
import pytest

from hookmesh.conformance import run_conformance
from hookmesh.conformance._session import Session, invocation
from hookmesh.schema import MessageKind
from hookmesh.testing import ServerProcess
from hookmesh.v1 import middleware_pb2 as pb
from hookmesh.v1 import middleware_pb2_grpc as pb_grpc
from tests.node_process import NODE_DIR, node_binary
from tests.sdk_sidecars import assert_audits_a_reply, listening

pytestmark = pytest.mark.timeout(120)


def _node(script: str, *args: str, env: dict[str, str] | None = None) -> Any:
    """clients/node/SCRIPT on 127.0.0.1:0 until the block ends."""
    return listening(node_binary(), str(NODE_DIR / script), *args, env=env)


def _audit(*args: str, env: dict[str, str] | None = None) -> Any:
    return _node("examples/audit.js", *args, env=env)


async def test_the_audit_example_reports_each_reply_through_a_real_agent(
    kind: MessageKind,
) -> None:
    async with _audit() as sidecar:
        await assert_audits_a_reply(sidecar, kind)


async def test_the_audit_example_passes_the_generic_rules_with_a_token() -> None:
    async with _audit("--token-env", "AUDIT_TOKEN", env={"AUDIT_TOKEN": "s3"}) as sidecar:
        results = await run_conformance(sidecar.address, token="s3", generic=True, timeout=3)
    assert [(r.name, r.detail) for r in results if not r.passed] == []
    assert {"generic.on_reply.answers", "token_required"} <= {r.name for r in results}


async def test_sigterm_drains_the_stream_once_its_invocation_ends() -> None:
    async with (
        _audit("--grace", "30") as sidecar,
        grpc.aio.insecure_channel(sidecar.address) as channel,
    ):
        session = Session(pb_grpc.MiddlewareServiceStub(channel), (), 5.0)
        try:
            await session.send(invocation("1", pb.HOOK_ON_REPLY, "flat", reply=pb.ReplyArgs()))
            await session.expect("1", "call_next")
            sidecar.process.send_signal(signal.SIGTERM)
            await session.silence(0.3, "the open invocation is still served")
            assert sidecar.process.returncode is None
            end = pb.DownstreamOutcome(stream_end=pb.StreamEnd())
            await session.send(pb.InterceptRequest(invocation_id="1", outcome=end))
            await session.expect("1", "done")
            async with asyncio.timeout(5):
                await session.reader
                assert await session.call.code() == grpc.StatusCode.OK
                assert await sidecar.process.wait() == 0
        finally:
            session.cancel()


_STEP = {"reasoning": pb.ReasoningArgs(tool_choice="auto")}


async def _ended_ok(session: Session, sidecar: ServerProcess) -> None:
    """The stream ends with OK and the process exits 0 (within a generous deadline)."""
    async with asyncio.timeout(10):
        await session.reader
        assert await session.call.code() == grpc.StatusCode.OK
        assert await sidecar.process.wait() == 0


async def test_end_sends_the_done_unasked_while_the_downstream_runs() -> None:
    """test/step-timeout.js ends each step from a timer with inv.end(): the done comes with
    no message from the agent to answer, and the hook is over at once (its pending next
    rejected), so SIGTERM finds no open invocation and the drain ends the stream."""
    async with (
        _node("test/step-timeout.js", "--grace", "30", env={"STEP_MS": "200"}) as sidecar,
        grpc.aio.insecure_channel(sidecar.address) as channel,
    ):
        session = Session(pb_grpc.MiddlewareServiceStub(channel), (), 5.0)
        try:
            await session.send(invocation("1", pb.HOOK_ON_REASONING, "flat", **_STEP))
            await session.expect("1", "call_next")
            got = await session.expect("1", "done")
            assert [m.emit.custom.name for m in got[:-1]] == ["step-timeout"]
            assert got[-1].done.error.reason == "STEP_TIMEOUT"
            # No agent message wakes the hook: end() did, so the drain finds nothing open.
            sidecar.process.send_signal(signal.SIGTERM)
            await _ended_ok(session, sidecar)
        finally:
            session.cancel()


async def test_sigterm_cuts_the_open_streams_at_the_end_of_the_grace() -> None:
    """An invocation that never ends keeps its stream only for --grace: then the stream
    ends with OK (the agent fails the invocation under its failure mode) and the process
    exits."""
    async with (
        _node("test/step-timeout.js", "--grace", "1", env={"STEP_MS": "600000"}) as sidecar,
        grpc.aio.insecure_channel(sidecar.address) as channel,
    ):
        session = Session(pb_grpc.MiddlewareServiceStub(channel), (), 5.0)
        try:
            await session.send(invocation("1", pb.HOOK_ON_REASONING, "flat", **_STEP))
            await session.expect("1", "call_next")
            sidecar.process.send_signal(signal.SIGTERM)
            await session.silence(0.3, "the open invocation is still served in the grace")
            assert sidecar.process.returncode is None
            await _ended_ok(session, sidecar)
        finally:
            session.cancel()


async def test_an_observer_on_the_sdk_sends_nothing_and_passes_the_generic_rules() -> None:
    """test/observer.js tries to mutate, emit, drop, end and replace in observe mode; the
    SDK sends none of it, so the generic rules (silence for observed invocations) pass."""
    async with _node("test/observer.js") as sidecar:
        results = await run_conformance(sidecar.address, generic=True, timeout=3)
    assert [(r.name, r.detail) for r in results if not r.passed] == []
    assert {"generic.on_reply.answers", "generic.on_model_call.answers"} <= {
        r.name for r in results
    }


async def test_the_sdk_s_own_node_tests_pass() -> None:
    """clients/node/test/pass-rest.test.js (node --test): passRest answers its item with a
    final verdict (keeping the drop) and sends nothing after; plain verdicts without it;
    nothing when observed."""
    process = await asyncio.create_subprocess_exec(
        node_binary(), "--test", "test/pass-rest.test.js",
        cwd=NODE_DIR, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    async with asyncio.timeout(60):
        out, _ = await process.communicate()
    output = out.decode()
    assert process.returncode == 0, output
    assert "# pass 4" in output
    assert "# fail 0" in output
