"""Tool search: tools the model sees only after a ``tool_search`` call finds them."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Annotated

from pydantic import Field

from hookmesh.middleware import AgentView, ModelCallArgs, ModelCallNext
from hookmesh.middleware._base import FailureMode, HookMode, Middleware
from hookmesh.middleware.builtin._support import _checks as check
from hookmesh.tools import Tool, ToolContext, tool

if TYPE_CHECKING:
    from hookmesh.models import ModelResult
    from hookmesh.retrieval import Embedder, Vectors

_WORD = re.compile(r"[a-z0-9]+")
_MAX_LISTED_NAMES = 100


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


class ToolSearchMiddleware(Middleware):
    """Keeps a large tool set out of the prompt until the model searches it.

    Registers `tools` (the dynamic tools) and a ``tool_search(query, max_results)`` tool.
    Before every model call (`on_model_call`) the dynamic tools not selected yet in this
    reply are removed from the tools offered; every other tool stays. A ``tool_search``
    call selects tools, which then stay visible for the rest of the
    reply; the selection is kept in ``middle_context["tool_search"][reply_id]``
    (``{"selected": [names]}``), so it survives a pause and resume. A new reply starts
    with the dynamic tools hidden again.

    Query syntax: ``select:a,b`` selects tools by exact name. Anything else is keywords
    matched against tool names and descriptions (a name word counts 3, a word of the
    description 1); a keyword written ``+word`` is required. With an `embedder` (for
    example the retrieval service's MiniLM, ``hookmesh.retrieval.default_embedder()``),
    the keyword ranking is fused by reciprocal rank with a ranking by embedding similarity
    between the query and each tool's name and description. At most ``max_results``
    (default `max_results`) tools are selected per call.

    Remote: ``on_model_call`` runs ``pre_only`` and narrows the tools with a ``tools``
    override (by name: a sidecar can hide tools, never add any); ``tool_search`` and the
    dynamic tools run in the sidecar through ``CallTool``, whose request carries the reply's
    state and whose answer the new selection. Called through ``CallTool`` without a reply (an
    older agent), ``tool_search`` answers the same text but selects nothing.

    Example:
        >>> from hookmesh.agent import tool
        >>> @tool
        ... def get_weather(city: str) -> str:
        ...     "Current weather for a city."
        ...     return "sunny"
        >>> [t.name for t in ToolSearchMiddleware([get_weather]).list_tools()]
        ['tool_search', 'get_weather']

    Args:
        tools: The dynamic tools (unique names).
        max_results: Default number of tools one search selects (the model may ask for
            fewer or up to `max_results_limit`).
        max_results_limit: Most tools one search may select.
        embedder: Ranks by embedding similarity too, when given.
        tool_name: The search tool's name.
        failure_mode: ``fail_closed`` (default) or ``fail_open``.
    """

    subscriptions: Mapping[str, tuple[str, ...]] = {"on_model_call": ()}
    hook_modes: Mapping[str, HookMode] = {"on_model_call": "pre_only"}

    def __init__(
        self,
        tools: Sequence[Tool],
        *,
        max_results: int = 5,
        max_results_limit: int = 20,
        embedder: Embedder | None = None,
        tool_name: str = "tool_search",
        failure_mode: FailureMode = "fail_closed",
    ) -> None:
        self.dynamic = {t.name: t for t in tools}
        if not self.dynamic or len(self.dynamic) != len(tools):
            raise ValueError("tools must be at least one tool, with unique names")
        if tool_name in self.dynamic:
            raise ValueError(f"a dynamic tool is named like the search tool {tool_name!r}")
        self.max_results_limit = check.whole("max_results_limit", max_results_limit)
        self.max_results = check.whole("max_results", max_results)
        if max_results > max_results_limit:
            raise ValueError("max_results must not exceed max_results_limit")
        self.embedder = embedder
        self.tool_name = tool_name
        self.failure_mode = check.failure(failure_mode)
        self._hidden = frozenset(self.dynamic)
        self._words = {
            name: (_words(name), _words(t.description)) for name, t in self.dynamic.items()
        }
        self._vectors: Vectors | None = None
        self._search_tool = self._build_tool()

    def middleware_key(self) -> str:
        return "tool_search"

    def list_tools(self) -> list[Tool]:
        return [self._search_tool, *self.dynamic.values()]

    # --- searching -------------------------------------------------------------------------

    async def search(self, query: str, max_results: int) -> tuple[list[str], str]:
        """The tools `query` selects, and the text the model gets back."""
        query = query.strip()
        if query.lower().startswith("select:"):
            asked = [n.strip() for n in query[len("select:") :].split(",") if n.strip()]
            found = [n for n in dict.fromkeys(asked) if n in self.dynamic][:max_results]
            unknown = [n for n in asked if n not in self.dynamic]
        else:
            found, unknown = await self._rank(query, max_results), []
        lines = [f"- {n}: {self.dynamic[n].description}" for n in found]
        text = (
            "These tools are now available to call:\n" + "\n".join(lines)
            if found
            else f"No tools match {query!r}. Try other keywords, or select:name."
        )
        if unknown:
            text += f"\nUnknown tools: {', '.join(unknown)}."
        return found, text

    async def _rank(self, query: str, limit: int) -> list[str]:
        terms = query.lower().split()
        required = [_words(t[1:]) for t in terms if t.startswith("+") and len(t) > 1]
        optional = _words(" ".join(t for t in terms if not t.startswith("+")))
        wanted = optional.union(*required) if required else optional
        candidates = [
            name
            for name, (in_name, in_text) in self._words.items()
            if all(r <= (in_name | in_text) for r in required)
        ]
        scores = {
            name: 3 * len(wanted & self._words[name][0]) + len(wanted & self._words[name][1])
            for name in candidates
        }
        by_words = sorted((n for n in candidates if scores[n] > 0), key=lambda n: (-scores[n], n))
        if self.embedder is None or not candidates:
            return by_words[:limit]
        from hookmesh.retrieval import reciprocal_rank_fusion

        vectors = await self._tool_vectors()
        (asked,) = await self.embedder.embed([query.replace("+", " ")])
        names = list(self.dynamic)
        similarity = {name: float(vectors[i] @ asked) for i, name in enumerate(names)}
        by_meaning = sorted(candidates, key=lambda n: (-similarity[n], n))
        return [f.key for f in reciprocal_rank_fusion([by_words, by_meaning])][:limit]

    async def _tool_vectors(self) -> Vectors:
        """Each dynamic tool's name and description embedded once (the set never changes)."""
        if self._vectors is None:
            assert self.embedder is not None
            texts = [f"{t.name.replace('_', ' ')}: {t.description}" for t in self.dynamic.values()]
            self._vectors = await self.embedder.embed(texts)
        return self._vectors

    def _build_tool(self) -> Tool:
        names = list(self.dynamic)
        listed = ", ".join(names[:_MAX_LISTED_NAMES]) + (
            ", ..." if len(names) > _MAX_LISTED_NAMES else ""
        )

        async def tool_search(
            context: ToolContext[AgentView],
            query: str,
            max_results: Annotated[int, Field(ge=1)] = self.max_results,
        ) -> str:
            """Find tools for the task at hand and make them callable.

            Args:
                query: 'select:name1,name2' for tools you know by name; otherwise keywords
                    describing what you need, '+word' for a word that must match.
                max_results: How many tools to select at most.
            """
            found, text = await self.search(query, min(max_results, self.max_results_limit))
            state = self.state(context.agent)
            state["selected"] = list(dict.fromkeys([*state.get("selected", ()), *found]))
            return text

        description = (
            f"Find more tools: {len(names)} tools are available but not shown until this "
            f"search selects them ({listed}). 'select:a,b' selects them by name; keywords "
            "search names and descriptions ('+word' is required). Selected tools stay "
            "callable for the rest of this reply."
        )
        made: Tool = tool(tool_search, name=self.tool_name, description=description, read_only=True)
        return made

    # --- hooks -----------------------------------------------------------------------------

    async def on_model_call(
        self, agent: AgentView, kwargs: ModelCallArgs, next_handler: ModelCallNext
    ) -> ModelResult:
        """Offer only the dynamic tools selected in this reply (and every other tool).

        Boundary: wraps one model call and changes only its ``tools`` kwarg.
        """
        selected = self.state(agent).get("selected", ())
        hidden = self._hidden.difference(selected)
        return await next_handler(tools=[d for d in kwargs["tools"] if d["name"] not in hidden])


__all__ = ["ToolSearchMiddleware"]
