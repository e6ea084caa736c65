"""PII guard: e-mail addresses, phone numbers, cards, IBANs, IP addresses and custom patterns"""

from hookmesh.middleware.builtin.pii._middleware import (
    TARGETS,
    PIIDetectedError,
    PIIMiddleware,
    Strategy,
    Target,
)

__all__ = [
    "TARGETS",
    "PIIDetectedError",
    "PIIMiddleware",
    "Strategy",
    "Target",
]
