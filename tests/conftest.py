"""Shared test setup: a clean hookmesh environment per test and the hypothesis profiles."""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, settings

from hookmesh.middleware import Middleware
from hookmesh.schema import MessageKind

if TYPE_CHECKING:
    from hookmesh.retrieval import MiniLMEmbedder

# NOTE: generated inputs are nested pydantic models; their build time varies with machine
# load, so no per-example deadline (the per-test pytest timeout still holds).
settings.register_profile(
    "default",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("ci", parent=settings.get_profile("default"), derandomize=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

# NOTE: a suite started in the background (`make test &`, nohup, some CI runners) inherits
# SIGINT ignored, and every child process inherits that in turn: a CLI under test would
# then never see Ctrl-C. The suite restores the default so children behave as in a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Drop every HOOKMESH_* variable so no test sees the developer's configuration."""
    for name in list(os.environ):
        if name.startswith("HOOKMESH_"):
            monkeypatch.delenv(name)
    yield


@pytest.fixture(scope="session")
def embedder() -> MiniLMEmbedder:
    """The process-wide all-MiniLM-L6-v2 embedder (loaded once, shared by every test)."""
    from hookmesh.retrieval import default_embedder

    return default_embedder()


@pytest.fixture(scope="session")
def span_exporter() -> Iterator[Any]:
    """An SDK tracer provider with an in-memory exporter, installed once for the process
    (OpenTelemetry allows one global provider); tests clear it before use."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    yield exporter
    provider.shutdown()


@pytest.fixture(scope="session")
def pki() -> dict[str, bytes]:
    """A CA, a server certificate for 127.0.0.1 and localhost, a client certificate
    (CN ``agent``) and a foreign CA, made once per test run."""
    from tests.pki import make_pki

    return make_pki()


@pytest.fixture(scope="session")
def metric_reader() -> Iterator[Any]:
    """An SDK meter provider with an in-memory reader (and the Prometheus reader a service's
    endpoint serves), installed once for the process; points are cumulative, so tests tell
    theirs apart by attributes."""
    from opentelemetry import metrics
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader, PrometheusMetricReader()])
    metrics.set_meter_provider(provider)
    yield reader
    provider.shutdown()


@pytest.fixture(params=["flat", "agentic"])
def kind(request: pytest.FixtureRequest) -> MessageKind:
    """Both message kinds: every agent-level test runs on each."""
    return request.param  # type: ignore[no-any-return]


Attach = Callable[[Middleware], Awaitable[Middleware]]
"""Attach a middleware to an agent: returns what to put in its middleware list."""


@pytest.fixture(params=["local", "sidecar"])
async def attach(request: pytest.FixtureRequest) -> AsyncIterator[Attach]:
    """How a test middleware joins the agent: in process, or served by a sidecar on loopback.

    Tests using it run both ways: same events, same order, same state.
    """
    from hookmesh.remote import RemoteMiddleware, serve_middleware

    servers: list[Any] = []
    remotes: list[Any] = []

    async def local(mw: Middleware) -> Middleware:
        return mw

    async def sidecar(mw: Middleware) -> Middleware:
        running = await serve_middleware(mw)
        servers.append(running)
        remote = await RemoteMiddleware.connect(
            f"127.0.0.1:{running.port}", failure_mode=mw.failure_mode, timeout=10.0
        )
        remotes.append(remote)
        return remote

    try:
        yield local if request.param == "local" else sidecar
    finally:
        for remote in remotes:
            await remote.aclose()
        for running in servers:
            await running.stop(None)
