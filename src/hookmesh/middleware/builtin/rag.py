"""Retrieval-augmented generation: knowledge-base passages as a search tool or a hint."""

from __future__ import annotations

import asyncio
import logging
import os
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, create_model

from hookmesh._security import ClientTLS
from hookmesh.errors import HookmeshError
from hookmesh.middleware import AgentView, ReasoningArgs, ReasoningNext
from hookmesh.middleware._base import FailureMode, Middleware
from hookmesh.retrieval import MAX_TOP_K, SEARCH_MODES, Hit, MetadataValue, SearchMode
from hookmesh.schema import AgentEvent, CustomEvent, HintBlockEvent, is_user, make_hint, text_of
from hookmesh.tools import Tool, ToolContext

if TYPE_CHECKING:
    from hookmesh.client import RetrievalClient

log = logging.getLogger("hookmesh.middleware.rag")

RAGMode = Literal["agentic", "static"]
"""``agentic``: the model searches with a tool; ``static``: passages are hinted up front."""
WARNING_EVENT = "rag.warning"
"""Name of the custom event that reports a failed search under ``fail_open``."""
DEFAULT_HINT_TEMPLATE = (
    "Passages from the knowledge base that may help with the user's latest message. Use "
    "them where relevant and cite them by number, e.g. [1]; ignore those that do not "
    "help.\n\n{context}"
)
DEFAULT_TOOL_NAME = "search_knowledge"
_MAX_QUERY_CHARS = 4096
_KB_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_ENV_PREFIX = "HOOKMESH_RAG_"


class RAGError(HookmeshError):
    """A knowledge search failed (the hook fails closed, or inside the search tool)."""

    reason = "RAG_SEARCH_FAILED"


class KnowledgeSearcher(Protocol):
    """What the middleware searches: `KnowledgeStore` (local) or `RetrievalClient` (remote)."""

    async def search(
        self,
        query: str,
        knowledge_bases: Sequence[str],
        *,
        mode: SearchMode = ...,
        top_k: int = ...,
        score_threshold: float | None = ...,
        metadata_filter: Mapping[str, MetadataValue] | None = ...,
    ) -> list[Hit]: ...


def format_passages(hits: Sequence[Hit]) -> str:
    """Numbered, cited passages: ``[1] (kb/document) text``, one paragraph each."""
    return "\n\n".join(
        f"[{n}] ({hit.knowledge_base}/{hit.document_id}) {hit.text.strip()}"
        for n, hit in enumerate(hits, 1)
    )


def latest_user_text(messages: Sequence[Any]) -> str:
    """The text of the latest user turn (hints and tool results are not user turns)."""
    for msg in reversed(messages):
        if is_user(msg):
            return text_of(msg)
    return ""


def _reason(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "RAG_TIMEOUT"
    return str(getattr(exc, "reason", "") or getattr(getattr(exc, "code", None), "name", ""))


class RAGMiddleware(Middleware):
    """Grounds replies in knowledge bases, searched on a retrieval service or a local store.

    Agentic mode (default) contributes a read-only, concurrency-safe tool (default name
    ``search_knowledge``) taking ``query`` and optional ``knowledge_bases``, an enum of the
    mounted bases: a name outside it is refused by the tool's argument validation before any
    search. The result is numbered, cited passages: ``[1] (kb/document) text``.

    Static mode searches at the first reasoning step of each reply with the latest user
    turn's text, and adds the passages (through `hint_template`) as a hint message for that
    step, announced by a hint_block event (`emit_hint_event`). The hint is removed after the
    step unless `persist_hint`. When nothing is found, no hint is added.

    A failed search (service down, timeout, unknown base) with ``fail_open`` (default) is
    logged and reported as a ``rag.warning`` custom event, and the reply goes on without
    passages; ``fail_closed`` ends the reply with an error naming this middleware (reason
    ``RAG_SEARCH_FAILED``, ``errorType`` ``RAGError``). In agentic mode the tool's result
    says the search failed (an error result the model reads), whatever the failure mode.

    State: ``{"searched": bool, "hits": int}`` in ``middle_context[key][reply_id]`` (static
    mode), so one instance serves any number of agents and concurrent replies, locally or in
    a sidecar (it needs the context there). The instance holds only its search client (one
    channel per event loop) or the store it was given.

    Whose search: with a retrieval service, each search acts for the reply's end user
    (`AgentView.user_id`, sent as ``x-hookmesh-user``), so the service's grants and
    ownership apply to that user, not to the agent's own principal; the agent must then be
    one of the service's `trusted_gateways` (a search refused as ``UNTRUSTED_GATEWAY``
    follows the failure mode). A reply with no known user searches as the agent.
    `act_for_user=False` always searches as the agent (a base every user may read).

    Not supported: per-user metadata filters from the conversation, reranking, and merging
    passages of one document; a query longer than 4096 characters is cut.

    Example:
        >>> rag = RAGMiddleware(["handbook"], target="127.0.0.1:7002", mode="static")
        >>> agent = Agent(model, middlewares=[rag])

    Args:
        knowledge_bases: Names of the mounted knowledge bases (1-16).
        target: ``host:port`` of a RetrievalService; or pass `store`.
        store: A local searcher (a `KnowledgeStore`, or anything with its ``search``).
        mode: ``agentic`` (a search tool) or ``static`` (a hint before the first step).
        top_k: Passages per search, 1-50.
        score_threshold: Drop hits scoring below it (see `KnowledgeStore.search`).
        search_mode: ``hybrid``, ``dense`` or ``lexical``.
        persist_hint: Static mode: keep the hint in the context after the step.
        emit_hint_event: Static mode: announce the hint with a hint_block event.
        hint_template: Static mode: the hint text, with exactly one ``{context}`` where the
            passages go (other braces are literal).
        failure_mode: What a failed search does in static mode (see above).
        timeout: Seconds one search may take.
        token_env: Environment variable holding the service's bearer token (a secret).
        tls: TLS to the service: ``ca_cert``, and for mTLS ``client_cert`` and
            ``client_key`` (file paths); plaintext when unset.
        tool_name: Name of the agentic tool (change it to mount two RAG middlewares).
        key: The middleware key (its `middle_context` slice and hint source).
        act_for_user: Search a retrieval service as the reply's end user (see above).
    """

    needs_context = True
    subscriptions: Mapping[str, tuple[str, ...]] = {"on_reasoning": ()}

    def __init__(
        self,
        knowledge_bases: Sequence[str],
        *,
        target: str | None = None,
        store: KnowledgeSearcher | None = None,
        mode: RAGMode = "agentic",
        top_k: int = 5,
        score_threshold: float | None = None,
        search_mode: SearchMode = "hybrid",
        persist_hint: bool = False,
        emit_hint_event: bool = True,
        hint_template: str = DEFAULT_HINT_TEMPLATE,
        failure_mode: FailureMode = "fail_open",
        timeout: float = 10.0,
        token_env: str | None = None,
        tls: Mapping[str, str] | None = None,
        tool_name: str = DEFAULT_TOOL_NAME,
        key: str = "rag",
        act_for_user: bool = True,
    ) -> None:
        if isinstance(knowledge_bases, str) or not 1 <= len(knowledge_bases) <= 16:
            raise ValueError("knowledge_bases must be a list of 1-16 knowledge base names")
        if len(set(knowledge_bases)) != len(knowledge_bases):
            raise ValueError("knowledge_bases must not repeat a name")
        bad = [n for n in knowledge_bases if not isinstance(n, str) or not _KB_NAME.fullmatch(n)]
        if bad:
            raise ValueError(f"not a knowledge base name: {bad[0]!r}")
        if not _TOOL_NAME.fullmatch(tool_name) or not key:
            raise ValueError("tool_name must be 1-64 of A-Z a-z 0-9 _ -, and key not empty")
        if (target is None) == (store is None):
            raise ValueError("pass exactly one of target (a retrieval service) or store")
        if mode not in ("agentic", "static"):
            raise ValueError(f"mode must be 'agentic' or 'static', not {mode!r}")
        if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
            raise ValueError(f"top_k must be an integer 1-{MAX_TOP_K}")
        if search_mode not in SEARCH_MODES:
            raise ValueError(f"search_mode must be one of {', '.join(SEARCH_MODES)}")
        if hint_template.count("{context}") != 1:
            raise ValueError("hint_template must contain exactly one {context}")
        if failure_mode not in ("fail_open", "fail_closed"):
            raise ValueError("failure_mode must be 'fail_open' or 'fail_closed'")
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self.knowledge_bases = list(knowledge_bases)
        self.target = target
        self.mode: RAGMode = mode
        self.top_k = top_k
        self.score_threshold = score_threshold
        self.search_mode: SearchMode = search_mode
        self.persist_hint = persist_hint
        self.emit_hint_event = emit_hint_event
        self.hint_template = hint_template
        self.failure_mode = failure_mode
        self.timeout = timeout
        self.token_env = token_env
        self.tls = ClientTLS(**tls) if tls else None
        self.tool_name = tool_name
        self.key = key
        self.act_for_user = act_for_user
        self._store = store
        self._client: RetrievalClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self._tool = self._build_tool() if mode == "agentic" else None

    @classmethod
    def from_env(cls) -> RAGMiddleware:
        """Built from ``HOOKMESH_RAG_*`` variables, for ``hookmesh sidecar --middleware
        hookmesh.middleware.builtin.rag:RAGMiddleware.from_env``: ``TARGET``,
        ``KNOWLEDGE_BASES`` (comma-separated), and optionally ``MODE``, ``TOP_K``,
        ``SEARCH_MODE``, ``SCORE_THRESHOLD``, ``TOKEN_ENV``.

        Raises:
            ValueError: A missing or bad value.
        """
        env = {
            k.removeprefix(_ENV_PREFIX): v
            for k, v in os.environ.items()
            if k.startswith(_ENV_PREFIX)
        }
        names = [n.strip() for n in env.get("KNOWLEDGE_BASES", "").split(",") if n.strip()]
        options: dict[str, Any] = {"target": env.get("TARGET") or None}
        if "MODE" in env:
            options["mode"] = env["MODE"]
        if "TOP_K" in env:
            options["top_k"] = int(env["TOP_K"])
        if "SEARCH_MODE" in env:
            options["search_mode"] = env["SEARCH_MODE"]
        if "SCORE_THRESHOLD" in env:
            options["score_threshold"] = float(env["SCORE_THRESHOLD"])
        if "TOKEN_ENV" in env:
            options["token_env"] = env["TOKEN_ENV"]
        if options["target"] is None:
            raise ValueError(f"set {_ENV_PREFIX}TARGET to the retrieval service's host:port")
        return cls(names, **options)

    def middleware_key(self) -> str:
        return self.key

    def implements(self, hook: str) -> bool:
        # NOTE(rag): only static mode hooks reasoning; agentic mode adds a tool and no layer.
        if hook == "on_reasoning" and self.mode != "static":
            return False
        return super().implements(hook)

    def list_tools(self) -> list[Tool]:
        return [self._tool] if self._tool is not None else []

    # -- searching ----------------------------------------------------------------------------

    def searcher(self) -> KnowledgeSearcher:
        """The local store, or the service client (one channel per event loop)."""
        if self._store is not None:
            return self._store
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            from hookmesh.client import RetrievalClient

            assert self.target is not None
            token = os.environ.get(self.token_env) if self.token_env else None
            self._client = RetrievalClient(
                self.target, timeout=self.timeout, token=token, tls=self.tls
            )
            self._client_loop = loop
        return self._client

    async def search(
        self, query: str, knowledge_bases: Sequence[str] | None = None, *, user: str = ""
    ) -> list[Hit]:
        """Search the mounted bases (or the named subset of them) within `timeout`, on a
        service for `user` (see the class: empty, or `act_for_user` off, searches as the
        agent; a local store has no users)."""
        query = query[:_MAX_QUERY_CHARS]
        bases = list(knowledge_bases or self.knowledge_bases)
        async with asyncio.timeout(self.timeout):
            searcher = self.searcher()
            if searcher is self._store:
                return await searcher.search(
                    query,
                    bases,
                    mode=self.search_mode,
                    top_k=self.top_k,
                    score_threshold=self.score_threshold,
                )
            assert self._client is not None
            return await self._client.search(
                query,
                bases,
                mode=self.search_mode,
                top_k=self.top_k,
                score_threshold=self.score_threshold,
                user=user if self.act_for_user else "",
            )

    async def aclose(self) -> None:
        """Close the service channel, if one is open (a given store is the caller's)."""
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    # -- agentic mode -------------------------------------------------------------------------

    def _build_tool(self) -> Tool:
        names = tuple(self.knowledge_bases)
        listed = ", ".join(names)
        choice: Any = Literal[names]  # the enum, checked by the tool's argument validation
        arguments: type[BaseModel] = create_model(
            f"{self.tool_name}_args",
            __config__=ConfigDict(extra="forbid"),
            query=(str, Field(min_length=1, max_length=_MAX_QUERY_CHARS)),
            knowledge_bases=(list[choice] | None, Field(None, min_length=1)),
        )
        parameters = {
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": "What to look for: a question or keywords.",
                },
                "knowledge_bases": {
                    "type": "array",
                    "items": {"type": "string", "enum": list(names)},
                    "minItems": 1,
                    "uniqueItems": True,
                    "description": f"Which knowledge bases to search (default: all of {listed}).",
                },
            },
            "required": ["query"],
            "additionalProperties": False,
        }

        async def search_knowledge(
            context: ToolContext[AgentView], query: str, knowledge_bases: list[str] | None = None
        ) -> str:
            try:
                hits = await self.search(
                    query,
                    list(dict.fromkeys(knowledge_bases or ())),
                    user=context.agent.user_id,
                )
            except Exception as exc:
                log.warning("knowledge search by tool failed: %s", exc)
                raise RAGError(f"the knowledge search failed ({_reason(exc) or exc})") from exc
            if not hits:
                return "No passages found."
            return format_passages(hits)

        return Tool(
            name=self.tool_name,
            description=(
                f"Search the knowledge bases ({listed}) for passages relevant to a query. "
                "Returns numbered passages as [n] (knowledge_base/document) text; cite them "
                "by number."
            ),
            parameters=parameters,
            func=search_knowledge,
            read_only=True,
            concurrency_safe=True,
            _model=arguments,
        )

    # -- static mode --------------------------------------------------------------------------

    async def on_reasoning(
        self, agent: AgentView, kwargs: ReasoningArgs, next_handler: ReasoningNext
    ) -> AsyncIterator[AgentEvent]:
        """Static mode: at a reply's first reasoning step, hint the passages for the user's
        latest message; later steps pass straight through.

        Wraps one reasoning step (compression ran before it, tools run after it). A failed
        search follows `failure_mode`; the hint is removed in ``finally`` (unless
        `persist_hint`), so an error or interrupt in the step does not leave it behind.
        """
        state = self.state(agent)
        if state.get("searched"):
            async for event in next_handler():
                yield event
            return
        state["searched"] = True
        query = latest_user_text(agent.state.context).strip()
        hits: list[Hit] = []
        if query:
            try:
                hits = await self.search(query, user=agent.user_id)
            except Exception as exc:
                if self.failure_mode == "fail_closed":
                    raise RAGError(
                        f"knowledge search failed: {exc}",
                        metadata={"cause": _reason(exc) or type(exc).__name__},
                    ) from exc
                log.warning("knowledge search failed; replying without passages: %s", exc)
                yield CustomEvent(
                    reply_id=agent.reply_id,
                    name=WARNING_EVENT,
                    value={
                        "reason": _reason(exc) or "RAG_SEARCH_FAILED",
                        "message": "knowledge search failed; replying without passages",
                    },
                )
        state["hits"] = len(hits)
        if not hits:
            async for event in next_handler():
                yield event
            return
        hint_id = f"{agent.reply_id}-{self.key}"
        text = self.hint_template.replace("{context}", format_passages(hits))
        agent.state.context.append(make_hint(agent.kind, text, self.key, id=hint_id))
        try:
            if self.emit_hint_event:
                yield HintBlockEvent(
                    reply_id=agent.reply_id, block_id=hint_id, text=text, source=self.key
                )
            async for event in next_handler():
                yield event
        finally:
            if not self.persist_hint:
                agent.state.context[:] = [m for m in agent.state.context if m.id != hint_id]
