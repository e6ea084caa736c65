"""OpenTelemetry metrics: replies, model calls (GenAI token usage and operation duration),
tool calls, middleware errors, remote hook latency and sidecar circuit breakers; exported
over OTLP when configured and scraped by Prometheus from any service's optional endpoint."""

from hookmesh.metrics._export import install_for_otlp, install_meter_provider
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
    "install_for_otlp",
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
]
