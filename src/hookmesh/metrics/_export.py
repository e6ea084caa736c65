"""Where the metrics go: an SDK meter provider with a Prometheus reader (scraped over HTTP
when a service asks for an endpoint, `hookmesh.server`) and an OTLP exporter when the
standard variables say."""

from __future__ import annotations

import logging
import os

from opentelemetry import metrics

log = logging.getLogger("hookmesh.metrics")

_OTLP_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")


def install_meter_provider() -> bool:
    """Install hookmesh's SDK meter provider once per process, unless one is installed.

    It has a Prometheus reader (served by a service's scrape endpoint) and, when
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


def install_for_otlp() -> None:
    """Install the meter provider when the OTLP variables ask for an export (a service that
    serves no scrape endpoint still exports)."""
    if any(os.environ.get(name) for name in _OTLP_VARIABLES):
        install_meter_provider()
