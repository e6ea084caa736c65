"""How services backed by a store report its failures over gRPC."""

from __future__ import annotations

import logging
from typing import NoReturn

import grpc

from hookmesh.errors import HookmeshError, RequestError, to_grpc_status

# Driver errors (psycopg, sqlite3) that mean the store cannot be reached right now.
_UNAVAILABLE = frozenset({"OperationalError", "PoolTimeout", "InterfaceError"})


def store_error(exc: Exception, store: str, log: logging.Logger) -> HookmeshError:
    """`exc` as an error with a code and stable reason; outages and bugs never show internals.

    Args:
        exc: What the store (or the code around it) raised.
        store: The store's name in messages, e.g. ``"memory store"``.
        log: Where outages (warning) and bugs (error, with traceback) are logged.
    """
    if isinstance(exc, HookmeshError):
        return exc
    if type(exc).__name__ in _UNAVAILABLE or isinstance(exc, ConnectionError):
        log.warning("%s unavailable: %s: %s", store, type(exc).__name__, exc)
        return RequestError(
            grpc.StatusCode.UNAVAILABLE,
            "STORE_UNAVAILABLE",
            f"the {store} is unavailable; retry later",
        )
    log.error("%s call failed", store, exc_info=exc)
    return RequestError(grpc.StatusCode.INTERNAL, "INTERNAL", "internal error; see the service log")


async def abort_with_store_error(
    context: grpc.aio.ServicerContext, exc: Exception, store: str, log: logging.Logger
) -> NoReturn:
    """End the call with `store_error(exc, ...)`."""
    await context.abort_with_status(to_grpc_status(store_error(exc, store, log)))
    raise AssertionError("abort_with_status returned")  # it raises: the call ends here
