"""Where the metrics go: an SDK meter provider with a Prometheus reader (scraped over HTTP
when a service asks for an endpoint) and an OTLP exporter when the standard variables say."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

from opentelemetry import metrics

log = logging.getLogger("hookmesh.metrics")

_OTLP_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")


def install_meter_provider() -> bool:
    """Install hookmesh's SDK meter provider once per process, unless one is installed.

    It has a Prometheus reader (served by `start_metrics_endpoint`) and, when
    OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_METRICS_ENDPOINT is set, an OTLP/gRPC
    exporter sending every 60 s (OTEL_METRIC_EXPORT_INTERVAL). False when a provider was
    already installed (the application's own, or this one): it is kept as it is.
    """
    from opentelemetry.sdk.metrics import MeterProvider

    if isinstance(metrics.get_meter_provider(), MeterProvider):
        return False
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader

    readers: list[MetricReader] = [PrometheusMetricReader()]
    if any(os.environ.get(name) for name in _OTLP_VARIABLES):
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter

        readers.append(PeriodicExportingMetricReader(OTLPMetricExporter()))
    metrics.set_meter_provider(MeterProvider(metric_readers=readers))
    return True


@dataclass
class MetricsEndpoint:
    """A running Prometheus scrape endpoint (``GET /metrics``)."""

    host: str
    port: int
    """The bound port (the OS picks one for port 0)."""
    _server: Any
    _thread: Any

    def close(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def start_metrics(listen: str = "") -> MetricsEndpoint | None:
    """What a service does at start: install the meter provider when metrics are wanted (an
    endpoint, or the OTLP variables set), and serve the endpoint when `listen` is set."""
    if listen:
        return start_metrics_endpoint(listen)
    if any(os.environ.get(name) for name in _OTLP_VARIABLES):
        install_meter_provider()
    return None


def start_metrics_endpoint(listen: str) -> MetricsEndpoint:
    """Serve the process's metrics for Prometheus at ``http://LISTEN/metrics``.

    Installs the meter provider first when none is (see `install_meter_provider`).

    Args:
        listen: ``host:port``; port 0 lets the OS pick. Loopback unless you mean otherwise.

    Raises:
        ValueError: `listen` is not ``host:port``.
        OSError: The port is taken.
    """
    from prometheus_client import start_http_server

    host, sep, port = listen.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"metrics endpoint {listen!r} is not host:port")
    install_meter_provider()
    server, thread = start_http_server(int(port), addr=host.strip("[]"))
    bound = server.server_address[1]
    log.info("metrics endpoint on http://%s:%d/metrics", host, bound)
    return MetricsEndpoint(host, bound, server, thread)
