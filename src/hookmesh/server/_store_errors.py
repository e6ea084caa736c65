"""How services backed by a store report its failures over gRPC."""

from __future__ import annotations

import functools
import logging
import sqlite3
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar, cast

import grpc

from hookmesh.errors import HookmeshError, RequestError

_Rpc = TypeVar("_Rpc", bound=Callable[..., Awaitable[Any]])

# SQLite primary result codes that mean "not now": another writer holds the file, the file
# cannot be opened, or the disk failed an I/O. Anything else ("no such table", a constraint,
# corruption) is a fault that retrying does not fix.
_SQLITE_OUTAGES = frozenset(
    {
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_PROTOCOL,
    }
)
# PostgreSQL SQLSTATEs of the same kind: connection exceptions (class 08), the server
# shutting down or starting up (57P01-57P03), too many connections (53300).
_PG_OUTAGE_CLASSES = ("08",)
_PG_OUTAGES = frozenset({"57P01", "57P02", "57P03", "53300"})


def is_outage(exc: BaseException) -> bool:
    """Whether `exc` says the store cannot be reached right now (worth a retry), judged by
    its type and the driver's error code, never by its class name or message."""
    if isinstance(exc, ConnectionError):
        return True
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)
        return code is not None and code & 0xFF in _SQLITE_OUTAGES
    # NOTE(services): psycopg is imported only by the PostgreSQL store; if it is not loaded,
    # no psycopg error can exist, so a process on SQLite never pays for the import.
    psycopg = sys.modules.get("psycopg")
    if psycopg is not None and isinstance(exc, psycopg.Error):
        state = exc.sqlstate
        if state is None:  # raised by the client: the connection failed, a pool timed out
            return isinstance(exc, psycopg.OperationalError)
        return state.startswith(_PG_OUTAGE_CLASSES) or state in _PG_OUTAGES
    return False


def store_error(exc: Exception, store: str, log: logging.Logger) -> HookmeshError:
    """`exc` as an error with a code and stable reason; outages and bugs never show internals.

    Args:
        exc: What the store (or the code around it) raised.
        store: The store's name in messages, e.g. ``"memory store"``.
        log: Where outages (warning) and bugs (error, with traceback) are logged.
    """
    if isinstance(exc, HookmeshError):
        return exc
    if is_outage(exc):
        log.warning("%s unavailable: %s: %s", store, type(exc).__name__, exc)
        return RequestError(
            grpc.StatusCode.UNAVAILABLE,
            "STORE_UNAVAILABLE",
            f"the {store} is unavailable; retry later",
        )
    log.error("%s call failed", store, exc_info=exc)
    return RequestError(grpc.StatusCode.INTERNAL, "INTERNAL", "internal error; see the service log")


@contextmanager
def store_outages(store: str, log: logging.Logger) -> Iterator[None]:
    """Around calls of a store: an outage raised inside is raised again as `store_error`'s
    UNAVAILABLE ``STORE_UNAVAILABLE`` (the driver's error chained, and logged as a warning);
    anything else goes on as raised, to its caller and past the servicer to the server
    interceptor (a `HookmeshError` as its status, a bug as INTERNAL with the request id).

    Args:
        store: The store's name in messages, e.g. ``"session store"``.
        log: Where outages are logged.
    """
    try:
        yield
    except Exception as exc:
        if not is_outage(exc):
            raise
        raise store_error(exc, store, log) from exc


def store_rpc(store: str, log: logging.Logger) -> Callable[[_Rpc], _Rpc]:
    """Decorator for the unary RPCs of a servicer over a store: an outage of the store ends
    the call with UNAVAILABLE ``STORE_UNAVAILABLE`` (`store_outages`), and the server
    interceptor ends it for anything else, so each method is only its happy path.

    Args:
        store: The store's name in messages, e.g. ``"memory store"``.
        log: Where outages are logged.
    """

    def wrap(method: _Rpc) -> _Rpc:
        @functools.wraps(method)
        async def rpc(self: Any, request: Any, context: grpc.aio.ServicerContext) -> Any:
            with store_outages(store, log):
                return await method(self, request, context)

        return cast(_Rpc, rpc)

    return wrap
