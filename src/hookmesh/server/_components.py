"""The health of what a process depends on (a sidecar, as the agents in it see it), answered
by every gRPC health service the process runs under the component's name, so `hookmesh
status` and probes can ask the agent service about its sidecars."""

from __future__ import annotations

import asyncio
import weakref

from grpc_health.v1 import health, health_pb2

_SERVING = health_pb2.HealthCheckResponse.SERVING
_NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
_UNKNOWN = health_pb2.HealthCheckResponse.SERVICE_UNKNOWN

_reports: dict[str, dict[int, bool]] = {}
"""Component name → reporter id → serving. One name may have several reporters (two agents,
or the chains before and after a reload, linked to one sidecar); any not serving wins."""
_servicers: weakref.WeakSet[health.aio.HealthServicer] = weakref.WeakSet()
_pending: set[asyncio.Task[None]] = set()


def _status(name: str) -> int:
    reports = _reports.get(name)
    if not reports:
        return _UNKNOWN
    return _SERVING if all(reports.values()) else _NOT_SERVING


def report_component(name: str, reporter: object, serving: bool | None) -> None:
    """Say whether `name` serves, as `reporter` sees it (None: it no longer does, e.g. its
    link closed). Every registered health service answers the new status for `name`
    (``Check`` and ``Watch``) once the event loop runs next."""
    reports = _reports.setdefault(name, {})
    if serving is None:
        reports.pop(id(reporter), None)
        if not reports:
            del _reports[name]
    else:
        reports[id(reporter)] = serving
    status = _status(name)
    for servicer in list(_servicers):  # none without a running server, so without a loop
        task = asyncio.get_running_loop().create_task(servicer.set(name, status))  # type: ignore[arg-type]
        _pending.add(task)
        task.add_done_callback(_pending.discard)


async def publish_components(servicer: health.aio.HealthServicer) -> None:
    """Have `servicer` answer for every component, now and as they change (until
    `unpublish_components`)."""
    _servicers.add(servicer)
    for name in list(_reports):
        await servicer.set(name, _status(name))  # type: ignore[arg-type]


def unpublish_components(servicer: health.aio.HealthServicer) -> None:
    """`servicer`'s server stopped: changes no longer go to it."""
    _servicers.discard(servicer)
