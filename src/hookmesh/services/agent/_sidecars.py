"""What the AdminService tells of the running chain's sidecars (`DescribeSidecars`)."""

from __future__ import annotations

from google.protobuf import timestamp_pb2

from hookmesh.remote import RemoteMiddleware
from hookmesh.services.agent._chain import MiddlewareChain
from hookmesh.v1 import admin_pb2 as _admin_pb2


def _status(mw: RemoteMiddleware, role: int) -> _admin_pb2.SidecarStatus:
    link = mw.link
    description = mw.describe()
    out = _admin_pb2.SidecarStatus(
        middleware_key=description.key,
        target=mw.target,
        role=role,  # type: ignore[arg-type]
        described=mw.described_now,
        description_hash=mw.description_hash,
        serving=mw.serving,
        hooks=sorted(description.hooks),
        invocations=link.calls,
        last_error=link.last_error,
    )
    if link.last_error_time is not None:
        when = timestamp_pb2.Timestamp()
        when.FromNanoseconds(int(link.last_error_time * 1e9))
        out.last_error_time.CopyFrom(when)
    return out


def sidecars_to_pb(chain: MiddlewareChain) -> list[_admin_pb2.SidecarStatus]:
    """Each remote middleware of `chain` in order, each followed by its candidate."""
    candidates = {id(r.live): r.candidate for r in chain.rollouts}
    out = []
    for mw in chain.middlewares:
        if not isinstance(mw, RemoteMiddleware):
            continue
        out.append(_status(mw, _admin_pb2.SIDECAR_ROLE_LIVE))
        candidate = candidates.get(id(mw))
        if isinstance(candidate, RemoteMiddleware):
            out.append(_status(candidate, _admin_pb2.SIDECAR_ROLE_CANDIDATE))
    return out
