"""Rollouts of a remote middleware with real sidecar processes: a canary serves exactly the
sessions its share picks (sticky per session), a shadow's decisions (context edits
included) are counted and never applied, a failing canary is rolled back automatically,
promote and rollback through the CLI fail no reply under load, and DescribeSidecars tells
each sidecar's state."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from hookmesh.cli._rollout import _line
from hookmesh.client import AdminClient, AgentClient, AgentClientError
from hookmesh.remote import ShadowMiddleware, session_bucket
from hookmesh.schema import AgentEvent, CustomEvent, ReplyEndEvent
from hookmesh.services.agent import AgentService, load_config, start_agent_service
from hookmesh.v1 import admin_pb2 as _admin_pb2
from tests.agent_helpers import SHORT_TIMEOUT
from tests.sidecar_process import agent_process, sidecar_process

pytestmark = pytest.mark.timeout(180)

LOAD = 20
"""Concurrent replies."""


def _entry(live: str, **rollout: Any) -> dict[str, Any]:
    return {"type": "remote", "target": live, "timeout": 5.0, "rollout": rollout}


def _write(path: Path, tmp_path: Path, *middlewares: dict[str, Any]) -> Path:
    config = {
        "store": f"sqlite:///{tmp_path}/agent.db",
        "admin_principals": ["anonymous"],
        "middlewares": list(middlewares),
    }
    path.write_text(yaml.safe_dump(config))
    return path


@asynccontextmanager
async def _service(tmp_path: Path, *middlewares: dict[str, Any]) -> AsyncIterator[AgentService]:
    path = _write(tmp_path / "agent.yaml", tmp_path, *middlewares)
    service = await start_agent_service(load_config(path), address="127.0.0.1:0")
    try:
        yield service
    finally:
        await service.stop(None)


@asynccontextmanager
async def _sidecars(*names: str) -> AsyncIterator[list[str]]:
    async with (
        sidecar_process(f"tests.rollout_middlewares:{names[0]}") as first,
        sidecar_process(f"tests.rollout_middlewares:{names[1]}") as second,
    ):
        yield [first.address, second.address]


def _versions(events: list[AgentEvent]) -> list[Any]:
    return [e.value for e in events if isinstance(e, CustomEvent) and e.name == "version"]


def _finish(events: list[AgentEvent]) -> str:
    end = events[-1]
    assert isinstance(end, ReplyEndEvent)
    return end.finish_reason


async def _reply(client: AgentClient, session_id: str = "") -> list[AgentEvent]:
    return [e async for e in client.reply("hi", session_id=session_id)]


async def test_a_canary_serves_exactly_the_sessions_of_its_share_every_reply(
    tmp_path: Path,
) -> None:
    sessions = [f"session-{i}" for i in range(60)]
    chosen = {s for s in sessions if session_bucket(s) < 3000}
    assert 6 < len(chosen) < 30  # the hash spreads these ids near the 30% share
    async with (
        _sidecars("V1", "V2") as (live, candidate),
        _service(tmp_path, _entry(live, mode="canary", target=candidate, share=0.3)) as service,
        AgentClient(f"127.0.0.1:{service.port}", timeout=SHORT_TIMEOUT) as client,
        AdminClient(f"127.0.0.1:{service.port}", timeout=SHORT_TIMEOUT) as admin,
    ):
        for _ in range(2):  # every reply of a session takes the same version
            for start in range(0, len(sessions), LOAD):
                batch = sessions[start : start + LOAD]
                replies = await asyncio.gather(*(_reply(client, s) for s in batch))
                for session, events in zip(batch, replies, strict=True):
                    assert _finish(events) == "completed"
                    assert _versions(events) == ["v2" if session in chosen else "v1"], session
        [status] = await admin.describe_rollouts()
    assert (status.middleware_key, status.candidate_key) == ("versioned", "versioned")
    assert (status.mode, status.state) == (
        _admin_pb2.ROLLOUT_MODE_CANARY,
        _admin_pb2.ROLLOUT_STATE_ACTIVE,
    )
    assert (status.canary.replies, status.canary.failed_replies) == (2 * len(chosen), 0)


async def test_a_shadow_is_compared_with_the_live_middleware_and_never_applied(
    tmp_path: Path,
) -> None:
    async with (
        _sidecars("V1", "V2") as (live, candidate),
        _service(
            tmp_path, _entry(live, mode="shadow", target=candidate, share=1.0, sample_size=3)
        ) as service,
        AgentClient(f"127.0.0.1:{service.port}", timeout=SHORT_TIMEOUT) as client,
        AdminClient(f"127.0.0.1:{service.port}", timeout=SHORT_TIMEOUT) as admin,
    ):
        replies = await asyncio.gather(*(_reply(client) for _ in range(LOAD)))
        for events in replies:
            assert _finish(events) == "completed"
            assert _versions(events) == ["v1"]  # the shadow's event never reaches the client
        [rollout] = service.servicer.chain.rollouts
        assert isinstance(rollout.shadow, ShadowMiddleware)
        await rollout.shadow.settled()
        [status] = await admin.describe_rollouts()
    shadow = status.shadow
    assert status.mode == _admin_pb2.ROLLOUT_MODE_SHADOW
    assert (shadow.compared_invocations, shadow.agreed_invocations) == (LOAD, 0)
    assert shadow.candidate_errors == 0
    assert [(d.kind, d.count) for d in shadow.disagreements] == [("events", LOAD)]
    assert len(shadow.samples) == 3
    sample = shadow.samples[-1]
    assert (sample.hook, sample.kind) == ("on_reasoning", "events")
    assert '"v1"' in sample.live and '"v2"' in sample.candidate
    assert shadow.latency_p99.ToNanoseconds() >= shadow.latency_p50.ToNanoseconds() > 0


async def test_a_shadow_of_the_same_version_agrees_on_every_invocation(tmp_path: Path) -> None:
    async with (
        _sidecars("V1", "V1") as (live, candidate),
        _service(tmp_path, _entry(live, mode="shadow", target=candidate, share=1.0)) as service,
        AgentClient(f"127.0.0.1:{service.port}", timeout=SHORT_TIMEOUT) as client,
        AdminClient(f"127.0.0.1:{service.port}", timeout=SHORT_TIMEOUT) as admin,
    ):
        for events in await asyncio.gather(*(_reply(client) for _ in range(LOAD))):
            assert _versions(events) == ["v1"]
        shadow = service.servicer.chain.rollouts[0].shadow
        assert isinstance(shadow, ShadowMiddleware)
        await shadow.settled()
        [status] = await admin.describe_rollouts()
    assert (status.shadow.compared_invocations, status.shadow.agreed_invocations) == (LOAD, LOAD)
    assert list(status.shadow.disagreements) == []


async def test_a_shadow_compares_the_context_edits_of_real_sidecars(tmp_path: Path) -> None:
    async with (
        _sidecars("HintsA", "HintsB") as (live, candidate),
        _service(tmp_path, _entry(live, mode="shadow", target=candidate, share=1.0)) as service,
        AgentClient(f"127.0.0.1:{service.port}", timeout=SHORT_TIMEOUT) as client,
        AdminClient(f"127.0.0.1:{service.port}", timeout=SHORT_TIMEOUT) as admin,
    ):
        for events in await asyncio.gather(*(_reply(client) for _ in range(LOAD))):
            assert _finish(events) == "completed"
        shadow = service.servicer.chain.rollouts[0].shadow
        assert isinstance(shadow, ShadowMiddleware)
        await shadow.settled()
        [status] = await admin.describe_rollouts()
    assert status.shadow.candidate_errors == 0
    assert [(d.kind, d.count) for d in status.shadow.disagreements] == [("context", LOAD)]
    sample = status.shadow.samples[-1]
    assert '"a"' in sample.live and '"b"' in sample.candidate and '"b"' not in sample.live
    printed = _line(status)  # what `hookmesh admin rollout status` prints
    assert printed[1].endswith(f"disagreements: context {LOAD}")
    assert printed[3].startswith("  - on_reasoning context in reply ")


async def test_a_shadow_compression_of_a_real_sidecar_is_compared_and_never_applied(
    tmp_path: Path,
) -> None:
    async with (
        _sidecars("KeepsAll", "Summarizes") as (live, candidate),
        _service(tmp_path, _entry(live, mode="shadow", target=candidate, share=1.0)) as service,
        AgentClient(f"127.0.0.1:{service.port}", timeout=SHORT_TIMEOUT) as client,
        AdminClient(f"127.0.0.1:{service.port}", timeout=SHORT_TIMEOUT) as admin,
    ):
        replies = await asyncio.gather(*(_reply(client) for _ in range(LOAD)))
        shadow = service.servicer.chain.rollouts[0].shadow
        assert isinstance(shadow, ShadowMiddleware)
        await shadow.settled()
        [status] = await admin.describe_rollouts()
    assert {_finish(events) for events in replies} == {"completed"}
    assert status.shadow.candidate_errors == 0
    assert [(d.kind, d.count) for d in status.shadow.disagreements] == [("context", LOAD)]
    [sample, *_] = status.shadow.samples
    assert sample.hook == "on_compress_context"
    assert '"summary"' in sample.candidate and '"summary"' not in sample.live


async def test_a_failing_canary_is_rolled_back_after_its_failed_share_passes_the_limit(
    tmp_path: Path,
) -> None:
    rollout = {"mode": "canary", "share": 1.0, "max_failed_share": 0.5, "min_replies": 3}
    async with (
        _sidecars("V1", "Broken") as (live, candidate),
        _service(tmp_path, _entry(live, target=candidate, **rollout)) as service,
        AgentClient(f"127.0.0.1:{service.port}", timeout=SHORT_TIMEOUT) as client,
        AdminClient(f"127.0.0.1:{service.port}", timeout=SHORT_TIMEOUT) as admin,
    ):
        failed = [_finish(await _reply(client)) for _ in range(3)]
        assert failed == ["error"] * 3
        [status] = await admin.describe_rollouts()
        assert status.state == _admin_pb2.ROLLOUT_STATE_ROLLED_BACK
        assert status.state_reason == (
            "automatic: 3 of 3 canary replies failed, over the 50% allowed"
        )
        for events in await asyncio.gather(*(_reply(client) for _ in range(LOAD))):
            assert (_finish(events), _versions(events)) == ("completed", ["v1"])
        [after] = await admin.describe_rollouts()
    assert (after.canary.replies, after.canary.failed_replies) == (3, 3)


async def test_rollout_calls_name_an_existing_rollout(tmp_path: Path) -> None:
    async with (
        _service(tmp_path) as service,
        AdminClient(f"127.0.0.1:{service.port}", timeout=SHORT_TIMEOUT) as admin,
    ):
        assert await admin.describe_rollouts() == []
        with pytest.raises(AgentClientError) as missing:
            await admin.promote_rollout("versioned")
    assert (missing.value.code.name, missing.value.reason) == ("NOT_FOUND", "ROLLOUT_NOT_FOUND")


async def test_promote_and_rollback_from_the_cli_fail_no_reply_under_load(tmp_path: Path) -> None:
    async with _sidecars("V1", "V2") as (live, candidate):
        entry = _entry(live, mode="canary", target=candidate, share=0.0)
        path = _write(tmp_path / "agent.yaml", tmp_path, entry)
        async with (
            agent_process(path) as agent,
            AgentClient(agent.address, timeout=SHORT_TIMEOUT) as client,
        ):
            seen: list[tuple[str, list[Any]]] = []
            stop = asyncio.Event()

            async def load() -> None:
                while not stop.is_set():
                    events = await _reply(client)
                    seen.append((_finish(events), _versions(events)))

            workers = [asyncio.create_task(load()) for _ in range(LOAD)]
            try:
                assert (await _cli(agent.address, "status"))[0] == 0
                code, out, _ = await _cli(agent.address, "promote")
                assert code == 0 and "promoted (promoted by anonymous)" in out
                assert _versions(await _reply(client)) == ["v2"]
                code, out, _ = await _cli(agent.address, "rollback", "--key", "versioned")
                assert code == 0 and "rolled_back (rolled back by anonymous)" in out
                assert _versions(await _reply(client)) == ["v1"]
                code, _, err = await _cli(agent.address, "promote", "--key", "nope")
                assert code == 1 and "[ROLLOUT_NOT_FOUND]" in err
            finally:
                stop.set()
                await asyncio.gather(*workers)
            code, out, _ = await _cli(agent.address, "status")
            sidecars = await _hookmesh("status", "--target", agent.address, "--sidecars")
    assert {finish for finish, _ in seen} == {"completed"}
    assert {tuple(v) for _, v in seen} == {("v1",), ("v2",)}  # both served during the load
    assert code == 0
    assert out.splitlines()[0] == (
        "versioned: canary of versioned (0% of sessions), rolled_back (rolled back by anonymous)"
    )
    code, out, _ = sidecars
    lines = out.splitlines()
    assert code == 0 and len(lines) == 3
    assert lines[0].startswith("server 1 ") and lines[0].endswith(" serving")
    for line, address, role in ((lines[1], live, "live"), (lines[2], candidate, "candidate")):
        fields = line.split()
        assert fields[:5] == ["sidecar", "versioned", address, role, "described"], line
        assert len(fields[5]) == 12 and fields[6] == "serving" and fields[8] == "calls"
        assert int(fields[7]) > 0


async def test_describe_sidecars_tells_described_serving_errors_and_never_invoked(
    tmp_path: Path,
) -> None:
    async with (
        _sidecars("V1", "Broken") as (live, candidate),
        sidecar_process("tests.remote_middlewares:Passer") as idle,
        _service(
            tmp_path,
            _entry(live, mode="canary", target=candidate, share=1.0),
            {"type": "remote", "target": idle.address, "timeout": 5.0},
        ) as service,
        AgentClient(f"127.0.0.1:{service.port}", timeout=SHORT_TIMEOUT) as client,
        AdminClient(f"127.0.0.1:{service.port}", timeout=SHORT_TIMEOUT) as admin,
    ):
        before = await admin.describe_sidecars()
        assert _finish(await _reply(client)) == "error"  # served by the broken canary
        broken = await admin.describe_sidecars()
        await admin.rollback_rollout()
        assert _finish(await _reply(client)) == "completed"
        served, tried, passer = await admin.describe_sidecars()
    assert [s.invocations for s in before] == [0, 0, 0]  # configured, never invoked
    # The canary failed before calling next: the inner sidecar was never invoked.
    assert [s.invocations for s in broken] == [0, 1, 0]
    assert [(s.target, s.role) for s in (served, tried, passer)] == [
        (live, _admin_pb2.SIDECAR_ROLE_LIVE),
        (candidate, _admin_pb2.SIDECAR_ROLE_CANDIDATE),
        (idle.address, _admin_pb2.SIDECAR_ROLE_LIVE),
    ]
    assert all(s.described and s.serving for s in (served, tried, passer))
    assert [s.middleware_key for s in (served, tried, passer)] == ["versioned"] * 2 + ["Passer"]
    assert served.hooks == ["on_reasoning"]
    # The same description hashes alike; another middleware's does not.
    assert len(served.description_hash) == 64
    assert served.description_hash == tried.description_hash != passer.description_hash
    assert (served.invocations, tried.invocations, passer.invocations) == (1, 1, 1)
    assert tried.last_error == "MIDDLEWARE_FAILED: this version is broken"
    assert tried.HasField("last_error_time") and not served.HasField("last_error_time")
    assert served.last_error == passer.last_error == ""


async def _cli(target: str, *args: str) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of `hookmesh admin rollout <args> --target <target>`."""
    return await _hookmesh("admin", "rollout", *args, "--target", target)


async def _hookmesh(*args: str) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of the `hookmesh` command."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "hookmesh.cli", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(SHORT_TIMEOUT * 2):
        out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def _local(live: str, **rollout: Any) -> dict[str, Any]:
    return {"type": "local", "import": f"tests.rollout_middlewares:{live}", "rollout": rollout}


async def test_a_local_middleware_rolls_out_as_a_canary_or_a_shadow(tmp_path: Path) -> None:
    """The same rollout, in process: a candidate class serves its share of sessions (canary)
    or is compared and never applied (shadow)."""
    sessions = [f"session-{i}" for i in range(40)]
    chosen = {s for s in sessions if session_bucket(s) < 5000}
    assert 5 < len(chosen) < 35
    canary = _local("V1", mode="canary", share=0.5, **{"import": "tests.rollout_middlewares:V2"})
    async with (
        _service(tmp_path, canary) as service,
        AgentClient(f"127.0.0.1:{service.port}", timeout=SHORT_TIMEOUT) as client,
    ):
        replies = await asyncio.gather(*(_reply(client, s) for s in sessions))
        for session, events in zip(sessions, replies, strict=True):
            assert _versions(events) == ["v2" if session in chosen else "v1"], session
    shadow = _local("V1", mode="shadow", share=1.0, **{"import": "tests.rollout_middlewares:V2"})
    async with (
        _service(tmp_path, shadow) as service,
        AgentClient(f"127.0.0.1:{service.port}", timeout=SHORT_TIMEOUT) as client,
        AdminClient(f"127.0.0.1:{service.port}", timeout=SHORT_TIMEOUT) as admin,
    ):
        for events in await asyncio.gather(*(_reply(client) for _ in range(LOAD))):
            assert _versions(events) == ["v1"]
        [rollout] = service.servicer.chain.rollouts
        assert isinstance(rollout.shadow, ShadowMiddleware)
        await rollout.shadow.settled()
        [status] = await admin.describe_rollouts()
    assert status.mode == _admin_pb2.ROLLOUT_MODE_SHADOW
    assert status.shadow.compared_invocations == LOAD
    assert [(d.kind, d.count) for d in status.shadow.disagreements] == [("events", LOAD)]


async def test_a_local_rollout_names_a_candidate_that_loads(tmp_path: Path) -> None:
    bad = _local("V1", mode="canary", **{"import": "tests.rollout_middlewares:Nothing"})
    with pytest.raises(ValueError, match="Nothing"):
        async with _service(tmp_path, bad):
            pass


async def test_a_promoted_shadow_serves_with_the_entrys_failure_mode_and_breaker(
    tmp_path: Path,
) -> None:
    entry = _entry("", mode="shadow", share=1.0)
    async with _sidecars("V1", "Broken") as (live, candidate):
        entry["target"], entry["rollout"]["target"] = live, candidate
        entry["failure_mode"] = "fail_closed"
        entry["breaker"] = {"misses": 7, "backoff_seconds": 2.0, "max_backoff_seconds": 9.0}
        async with (
            _service(tmp_path, entry) as service,
            AgentClient(f"127.0.0.1:{service.port}", timeout=SHORT_TIMEOUT) as client,
        ):
            assert _finish(await _reply(client)) == "completed"  # the shadow's error is counted
            [rollout] = service.servicer.chain.rollouts
            settings = rollout.candidate.link.breaker._settings  # type: ignore[attr-defined]
            assert (settings.misses, settings.backoff, settings.max_backoff) == (7, 2.0, 9.0)
            rollout.promote("ops")
            assert _finish(await _reply(client)) == "error"  # fail_closed, as the entry says
