"""Middlewares: the base class with its hooks, and the chains the agent builds from them."""

from hookmesh.middleware._base import (
    ALLOW,
    ASK,
    HOOKS,
    ONION_HOOKS,
    FailureMode,
    HookMode,
    Middleware,
    PermissionDecision,
)

__all__ = [
    "ALLOW",
    "ASK",
    "HOOKS",
    "ONION_HOOKS",
    "FailureMode",
    "HookMode",
    "Middleware",
    "PermissionDecision",
]
