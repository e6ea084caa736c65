"""Middlewares: the base class with its hooks, and the chains the agent builds from them."""

from hookmesh.middleware._base import (
    ALLOW,
    ASK,
    HOOKS,
    ONION_HOOKS,
    FailureMode,
    HookMode,
    Middleware,
    MiddlewareDefinitionError,
    PermissionDecision,
    check_middleware,
)
from hookmesh.middleware._chain import (
    AwaitCall,
    EventCall,
    build_await_chain,
    build_event_chain,
    core_step,
    culprit,
    skip_failed,
)

__all__ = [
    "ALLOW",
    "ASK",
    "HOOKS",
    "ONION_HOOKS",
    "AwaitCall",
    "EventCall",
    "FailureMode",
    "HookMode",
    "Middleware",
    "MiddlewareDefinitionError",
    "PermissionDecision",
    "build_await_chain",
    "build_event_chain",
    "check_middleware",
    "core_step",
    "culprit",
    "skip_failed",
]
