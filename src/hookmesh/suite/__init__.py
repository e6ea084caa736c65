"""The whole suite on one machine: `hookmesh up` (one agent, or replicas behind Envoy) and the
demo (`hookmesh demo`)."""

from hookmesh.suite._parts import GATEWAYS, SuiteError, service_settings
from hookmesh.suite._replicas import Replicas, start_replicas
from hookmesh.suite._up import (
    A2A_ADDRESS,
    AGENT_ADDRESS,
    AGUI_ADDRESS,
    DATA_DIR,
    MCP_ADDRESS,
    MEMORY_ADDRESS,
    RETRIEVAL_ADDRESS,
    SIDECAR_ADDRESS,
    SUITE_PRINCIPAL,
    SUITE_TOKEN_ENV,
    SUITE_TOKENS_ENV,
    TTS_ADDRESS,
    Suite,
    default_suite_config,
    describe_model,
    secure_suite,
    start_suite,
)

__all__ = [
    "A2A_ADDRESS",
    "AGENT_ADDRESS",
    "AGUI_ADDRESS",
    "DATA_DIR",
    "GATEWAYS",
    "MCP_ADDRESS",
    "MEMORY_ADDRESS",
    "RETRIEVAL_ADDRESS",
    "SIDECAR_ADDRESS",
    "SUITE_PRINCIPAL",
    "SUITE_TOKENS_ENV",
    "SUITE_TOKEN_ENV",
    "TTS_ADDRESS",
    "Replicas",
    "Suite",
    "SuiteError",
    "default_suite_config",
    "describe_model",
    "secure_suite",
    "service_settings",
    "start_replicas",
    "start_suite",
]
