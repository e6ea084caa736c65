"""The sidecar conformance kit: the reference middleware and the runner that checks a sidecar."""

from hookmesh.conformance._command import conformance as conformance_command
from hookmesh.conformance._middleware import (
    ConformanceError,
    ConformanceMiddleware,
    ObservingConformanceMiddleware,
)
from hookmesh.conformance._runner import RuleResult, run_conformance

__all__ = [
    "ConformanceError",
    "ConformanceMiddleware",
    "ObservingConformanceMiddleware",
    "RuleResult",
    "conformance_command",
    "run_conformance",
]
