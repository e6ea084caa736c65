"""Who failed: the middleware an error belongs to, for its failure mode and the reply's error.

An error is tagged once, by the first boundary it crosses that knows its owner: a chain
layer tags what a hook raises as it is called, the agent tags what its own transformers and
after-agent hooks raise, and a middleware built of parts (the remote proxy) tags its own
errors. Only an error raised inside a hook's async generator or coroutine body, which no
boundary sees on the way out without a layer around every event (measured: as costly as the
middleware itself), is found from the traceback instead: the deepest frame that runs with a
middleware as ``self``, unless a core step or a chat model lies deeper.
"""

from __future__ import annotations

from collections.abc import Callable
from types import CodeType
from typing import Any

from hookmesh.middleware._base import Middleware
from hookmesh.models import ChatModel

_OWNER = "__hookmesh_owner__"
_CORE_CODES: set[CodeType] = set()


class _Core:
    """The owner of errors raised by the agent's loop, a model or a tool."""

    def __repr__(self) -> str:
        return "CORE"


CORE = _Core()
"""Tag for an error of the core (the loop, a model or a tool): no middleware's fault."""


def blame(exc: BaseException, owner: Middleware | _Core) -> BaseException:
    """Tag `exc` with its owner unless a boundary nearer its origin already did."""
    if _OWNER not in exc.__dict__:
        setattr(exc, _OWNER, owner)
    return exc


def core_step(func: Callable[..., Any]) -> Callable[..., Any]:
    """Mark `func` as agent core, so errors raised below it are never blamed on a middleware."""
    _CORE_CODES.add(func.__code__)
    return func


def culprit(exc: BaseException) -> Middleware | None:
    """The middleware `exc` belongs to, or None when the core (or a model or tool) raised it."""
    owner = exc.__dict__.get(_OWNER)
    if owner is not None:
        return owner if isinstance(owner, Middleware) else None
    found: Middleware | None = None
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code in _CORE_CODES:
            found = None
        else:
            self = frame.f_locals.get("self")
            if isinstance(self, Middleware):
                found = self
            elif isinstance(self, ChatModel):
                found = None
        tb = tb.tb_next
    return found
