"""How a store the agent service calls on a user's behalf (erasure, export) failed.

A store that is down or slow is worth calling again; one that refuses the agent service
(its token, its gateway trust, a missing grant) will refuse again until someone fixes the
configuration, so "call again" would send the operator in circles.
"""

from __future__ import annotations

import grpc

from hookmesh.client import AgentClientError
from hookmesh.errors import RequestError

_PASSING = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.CANCELLED,
    }
)
"""The codes of a failure that may pass: the store is down, slow, full or restarting."""


def unreachable(kind: str, store: str, why: str, left: str) -> RequestError:
    """UNAVAILABLE ``<kind>_STORE_UNAVAILABLE``: `store` could not be reached; call again.

    `left` says what the failure leaves (what was erased stays, the export is incomplete).
    """
    return RequestError(
        grpc.StatusCode.UNAVAILABLE,
        f"{kind}_STORE_UNAVAILABLE",
        f"the store {store} could not be reached ({why}); {left}: call again",
        metadata={"store": store},
    )


def refused(kind: str, store: str, why: str, left: str) -> RequestError:
    """FAILED_PRECONDITION ``<kind>_STORE_REFUSED``: `store` refuses the agent service
    (credentials, grants, a folder outside its root) until its configuration changes."""
    return RequestError(
        grpc.StatusCode.FAILED_PRECONDITION,
        f"{kind}_STORE_REFUSED",
        f"the store {store} refused the agent service ({why}); {left}: fix the agent "
        "service's configuration or its grant there, then call again",
        metadata={"store": store},
    )


def failed_call(kind: str, store: str, exc: AgentClientError, left: str) -> RequestError:
    """The call to the service holding `store` failed: `unreachable` when the failure may
    pass, else `refused`."""
    why = f"{exc.code.name}: {exc.message}"
    if exc.code in _PASSING:
        return unreachable(kind, store, why, left)
    return refused(kind, store, why, left)


def failed_files(kind: str, stores: str, exc: OSError | ValueError, left: str) -> RequestError:
    """A middleware's file store failed: `refused` for a user's folder resolving outside
    its root (a link someone planted: no retry helps), else `unreachable`."""
    if isinstance(exc, ValueError):
        return refused(kind, stores, str(exc), left)
    return unreachable(kind, stores, str(exc), left)
