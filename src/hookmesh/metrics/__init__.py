"""OpenTelemetry metrics: replies, model calls (GenAI token usage and operation duration),
tool calls, middleware errors, remote hook latency and sidecar circuit breakers; exported
over OTLP when configured and scraped by Prometheus from any service's optional endpoint."""

from hookmesh.metrics._export import (
    MetricsEndpoint,
    install_meter_provider,
    start_metrics,
    start_metrics_endpoint,
)
from hookmesh.metrics._instruments import (
    record_canary_reply,
    record_circuit,
    record_circuit_rejection,
    record_middleware_error,
    record_model_call,
    record_remote_hook,
    record_reply,
    record_shadow_comparison,
    record_tool_call,
)

__all__ = [
    "MetricsEndpoint",
    "install_meter_provider",
    "record_canary_reply",
    "record_circuit",
    "record_circuit_rejection",
    "record_middleware_error",
    "record_model_call",
    "record_remote_hook",
    "record_reply",
    "record_shadow_comparison",
    "record_tool_call",
    "start_metrics",
    "start_metrics_endpoint",
]
