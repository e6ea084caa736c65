"""`hookmesh admin rollout status|promote|rollback`: a candidate middleware's rollout on a
running agent service (docs/rollout.md)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from hookmesh.cli._admin import admin_app
from hookmesh.cli._app import TlsCaOption, TokenEnvOption, call_with

rollout_app = typer.Typer(help="Shadow and canary rollouts of remote middlewares.")
admin_app.add_typer(rollout_app, name="rollout", no_args_is_help=True)

TargetOption = Annotated[str, typer.Option(help="Agent service address.")]
KeyOption = Annotated[
    str,
    typer.Option("--key", help="The live middleware's key (may be left out with one rollout)."),
]
TimeoutOption = Annotated[float, typer.Option(help="Seconds the call may take.")]


def _line(status: Any) -> list[str]:
    """The lines one rollout prints."""
    from hookmesh.cli._sidecar_status import enum_word
    from hookmesh.v1 import admin_pb2 as _admin_pb2

    mode = enum_word(_admin_pb2.RolloutMode, status.mode, "ROLLOUT_MODE_")
    state = enum_word(_admin_pb2.RolloutState, status.state, "ROLLOUT_STATE_")
    head = f"{status.middleware_key}: {mode} of {status.candidate_key} ({status.share:.0%} of "
    head += f"sessions), {state}"
    lines = [head + (f" ({status.state_reason})" if status.state_reason else "")]
    if status.HasField("canary"):
        canary = status.canary
        limit = (
            f"rolls back over {canary.max_failed_share:.0%} after {canary.min_replies}"
            if canary.max_failed_share
            else "no automatic rollback"
        )
        lines.append(f"  replies {canary.replies}, failed {canary.failed_replies}; {limit}")
    if status.HasField("shadow"):
        shadow = status.shadow
        kinds = ", ".join(f"{d.kind} {d.count}" for d in shadow.disagreements) or "none"
        p50 = shadow.latency_p50.ToNanoseconds() / 1e6
        p99 = shadow.latency_p99.ToNanoseconds() / 1e6
        lines.append(
            f"  compared {shadow.compared_invocations}, agreed {shadow.agreed_invocations}, "
            f"candidate errors {shadow.candidate_errors}; disagreements: {kinds}"
        )
        lines.append(f"  candidate latency p50 {p50:.2f} ms, p99 {p99:.2f} ms")
        for sample in shadow.samples:
            lines.append(f"  - {sample.hook} {sample.kind} in reply {sample.reply_id}:")
            lines.append(f"      live:      {sample.live}")
            lines.append(f"      candidate: {sample.candidate}")
    return lines


@rollout_app.command("status")
def status(
    target: TargetOption = "127.0.0.1:7000",
    token_env: TokenEnvOption = None,
    tls_ca: TlsCaOption = None,
    timeout: TimeoutOption = 10.0,
) -> None:
    """Print each rollout of the running chain: its state, and the canary's replies or the
    shadow's agreement, disagreements by kind, latency and recent disagreements."""
    from hookmesh.client import AdminClient

    async def work(admin: Any) -> int:
        rollouts = await admin.describe_rollouts()
        if not rollouts:
            print("no rollout configured")
        for rollout in rollouts:
            print("\n".join(_line(rollout)))
        return 0

    call_with(AdminClient, target, timeout, token_env, tls_ca, work)


@rollout_app.command("promote")
def promote(
    key: KeyOption = "",
    target: TargetOption = "127.0.0.1:7000",
    token_env: TokenEnvOption = None,
    tls_ca: TlsCaOption = None,
    timeout: TimeoutOption = 10.0,
) -> None:
    """Give every new reply the candidate (running replies finish as they started). Lasts
    until a reload or restart: then set the entry's target to the candidate."""
    from hookmesh.client import AdminClient

    async def work(admin: Any) -> int:
        print("\n".join(_line(await admin.promote_rollout(key))))
        return 0

    call_with(AdminClient, target, timeout, token_env, tls_ca, work)


@rollout_app.command("rollback")
def rollback(
    key: KeyOption = "",
    target: TargetOption = "127.0.0.1:7000",
    token_env: TokenEnvOption = None,
    tls_ca: TlsCaOption = None,
    timeout: TimeoutOption = 10.0,
) -> None:
    """Give every new reply the live middleware again (running replies finish as they
    started)."""
    from hookmesh.client import AdminClient

    async def work(admin: Any) -> int:
        print("\n".join(_line(await admin.rollback_rollout(key))))
        return 0

    call_with(AdminClient, target, timeout, token_env, tls_ca, work)
