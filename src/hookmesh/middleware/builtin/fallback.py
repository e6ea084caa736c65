"""Model fallback: when the model fails, the same call goes to the next model in a list."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

from hookmesh.middleware import AgentView, ModelCallArgs, ModelCallNext
from hookmesh.middleware._base import Middleware
from hookmesh.middleware.builtin._support._retry import model_error_filter, prime
from hookmesh.models import ChatModel, ModelError, ModelResult
from hookmesh.schema import CustomEvent

if TYPE_CHECKING:
    pass

FALLBACK_EVENT = "hookmesh.model_fallback"
"""Name of the custom event sent each time a call moves on to the next model:
``{"failed": model name, "error": reason: message, "next": model name}``."""


class ModelFallbackMiddleware(Middleware):
    """Sends a failed model call to the next model of a list, in order, until one answers.

    A failure moves on when it is one of `errors` and, for a `ModelError` with an HTTP
    status, that status is in `statuses` (None: any). A streamed call moves on when it fails
    before its first chunk. Each move emits a `FALLBACK_EVENT`; the reply's model_call_end
    names the model that answered. When the last model fails too, its error goes up.

    Models are `ChatModel` objects, or names of models the agent has configured, resolved
    with ``agent.resolve_model(name)`` (a sidecar can only use names; see Remote).

    State: none. Remote: a sidecar names the model (``ModelCallOverrides.model``, resolved by
    the agent) and answers the error outcome with another ``call_next``; a stream moves on
    only while none of its chunks went upstream.

    Example:
        >>> from hookmesh.models import ScriptedChatModel
        >>> mw = ModelFallbackMiddleware([ScriptedChatModel(["hi"], model_name="backup")])
        >>> [m.model_name for m in mw.models]
        ['backup']

    Args:
        models: The fallbacks, tried in order after the agent's own model.
        errors: Exception classes that move on to the next model.
        statuses: HTTP statuses of a `ModelError` that move on; None: any.
    """

    def __init__(
        self,
        models: Sequence[ChatModel | str],
        errors: tuple[type[BaseException], ...] = (ModelError,),
        statuses: Collection[int] | None = None,
    ) -> None:
        if not models:
            raise ValueError("ModelFallbackMiddleware needs at least one fallback model")
        bad = [m for m in models if not isinstance(m, ChatModel | str) or m == ""]
        if bad:
            raise ValueError(f"fallback models must be ChatModels or model names, not {bad!r}")
        self.models = list(models)
        self._moves_on = model_error_filter(errors, statuses)

    def middleware_key(self) -> str:
        return "model_fallback"

    async def on_model_call(
        self, agent: AgentView, kwargs: ModelCallArgs, next_handler: ModelCallNext
    ) -> ModelResult:
        """Call the downstream with each model in turn until one answers.

        Wraps the model call; inner model-call middlewares see every attempt, with the model
        it goes to in ``kwargs["model"]``. A failure of the last model is re-raised.
        """
        current = kwargs["model"]
        overrides: dict[str, Any] = {}
        for fallback in self.models:
            try:
                return await prime(await next_handler(**overrides))
            except Exception as exc:
                if not self._moves_on(exc):
                    raise
                nxt = _resolve(agent, fallback)
                agent.emit(
                    CustomEvent(
                        reply_id=agent.reply_id,
                        name=FALLBACK_EVENT,
                        value={
                            "failed": current.model_name,
                            "error": f"{getattr(exc, 'reason', type(exc).__name__)}: {exc}",
                            "next": nxt.model_name,
                        },
                    )
                )
                current = nxt
                overrides = {"model": nxt}
        return await prime(await next_handler(**overrides))


def _resolve(agent: AgentView, model: ChatModel | str) -> Any:
    """A fallback as the model to pass downstream: a `ChatModel`, or what the agent (or the
    sidecar) resolves a configured name to (an unknown name fails with UNKNOWN_MODEL)."""
    return model if not isinstance(model, str) else agent.resolve_model(model)
