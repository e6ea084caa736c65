"""Long-term memory: recall facts about the user at reply start, remember the turn after it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from hookmesh._security import ClientTLS
from hookmesh.agent import Tool, new_id
from hookmesh.middleware import AgentView, ReasoningArgs, ReasoningNext, ReplyArgs, ReplyNext
from hookmesh.middleware._base import FailureMode, HookMode
from hookmesh.middleware.builtin.memory._link import (
    WARNING_EVENT,
    MemoryUnavailableError,
)
from hookmesh.middleware.builtin.memory._tools import DEFAULT_PROMPT_NOTE, MemoryTools
from hookmesh.schema import (
    AgentEvent,
    HintBlockEvent,
    Message,
    is_user,
    make_assistant,
    make_hint,
    make_user_text,
    text_of,
)

if TYPE_CHECKING:
    from hookmesh.client import MemoryClient
    from hookmesh.memory import Memories

ControlMode = Literal["static_control", "agent_control", "both"]
"""Who drives memory: the middleware (search before, write after), the agent (tools), both."""
WriteMode = Literal["await", "background"]
"""Whether the reply waits for the write-back of its turn."""
DEFAULT_HINT_TEMPLATE = (
    "Long-term memories about the user, from earlier conversations (they may be outdated: "
    "the current conversation wins):\n{memories}"
)
"""How recalled memories are shown to the model; ``{memories}`` is one ``- fact`` per line."""
_MAX_QUERY_CHARS = 2000
DEFAULT_RECALL_THRESHOLD = 0.1
"""Cosine floor of recall. With the default MiniLM embedder a task unrelated to a fact (tax
law, a router, a flight) scored at most 0.07 against it, while weak but real relations
("Any dinner ideas?" / "The user is vegetarian.") scored 0.15 and direct questions 0.34 or
more (docs/middleware/memory.md); the floor drops the first and keeps the rest."""
_HOOKS: dict[str, frozenset[str]] = {
    "static_control": frozenset({"on_reply", "on_reasoning", "after_agent"}),
    "agent_control": frozenset({"on_reply", "on_system_prompt"}),
    "both": frozenset({"on_reply", "on_reasoning", "after_agent", "on_system_prompt"}),
}


def _metadata_id(messages: Sequence[Message], key: str) -> str | None:
    """The last non-empty string `key` in the messages' metadata (the request's say)."""
    found = None
    for msg in messages:
        value = (msg.metadata or {}).get(key)
        if isinstance(value, str) and value:
            found = value
    return found


class MemoryMiddleware(MemoryTools):
    """Long-term memory for an agent, kept by a memory service or an in-process store.

    Control modes (`mode`):

    - ``static_control``: when the first reasoning step starts, search the user's memories
      with the user's input and show the best ones to the model as a hint (a hint_block
      event reports them; the hint is re-added at every step of the reply and removed after
      each, so it never stays in the session); after a successful reply (`after_agent`),
      write the turn back (user input and final answer; the memory service extracts facts
      with its model, or stores the user's statements verbatim). The write is awaited, or with
      ``write="background"`` runs as a task the instance tracks (`drain`, `aclose`).
    - ``agent_control``: contribute ``search_memory`` and ``add_memory`` tools and a short
      system-prompt note; the agent decides. The tools find the reply's user in the run
      context (`ToolContext`), so they work the same in a sidecar (through ``CallTool``).
    - ``both`` (default): all of the above.

    Scope: the user id is, first found: the request's (``user_id`` in the metadata of the
    reply's input messages, only with `scope_from_metadata` — turn it on only behind a
    trusted gateway that sets it), the agent's authenticated user (`Agent.user_id`: the
    agent service's caller), `user_id`, and (with `session_as_user`) the session id; without
    one, memory is skipped for the reply. The
    agent id likewise (metadata ``agent_id``, else `agent_id`, else none); the session id is
    the agent's session. Searches cover the user's memories of this agent
    (`search_by_agent`) or all of the user's memories.

    Failures (service down, timeout, bad request): ``fail_open`` (default) logs, reports a
    ``memory.warning`` custom event where it can (on_reasoning; a tool answers with an
    error result) and the reply goes on; ``fail_closed`` ends the reply with
    ``MEMORY_UNAVAILABLE``. Background writes always fail open (the reply is over).

    State: ``middle_context["memory"][reply_id]`` holds the scope, the user's turn and the
    recalled facts (JSON); the instance keeps only its client (one per event loop) and its
    background tasks, so it may serve many agents and concurrent replies.

    Not supported: media in turns (text only); source message ids of a turn sent through a
    sidecar are minted by the sidecar when the client sent none (they do not match the
    agent's context ids).

    Example:
        >>> mw = MemoryMiddleware(target="127.0.0.1:7004", user_id="alice")
        >>> sorted(t.name for t in mw.list_tools())
        ['add_memory', 'search_memory']

    Args:
        target: ``host:port`` of a MemoryService (used when `store` is None).
        store: An in-process `Memories` backend (e.g. a `MemoryStore`) instead of a service.
        mode: ``static_control``, ``agent_control`` or ``both``.
        user_id: The user when the request names none.
        agent_id: The agent when the request names none ("" for none).
        session_as_user: With no user from the request or `user_id`, use the session id.
        scope_from_metadata: Read ``user_id``/``agent_id`` from the input messages' metadata
            (off by default: only for callers trusted to name the user, e.g. a gateway).
        search_by_agent: Static and tool searches only see memories of the same agent.
        top_k: Memories recalled at reply start (1-50).
        score_threshold: Cosine floor for recalled memories (-1 to 1; 0: none); see
            `DEFAULT_RECALL_THRESHOLD`.
        write_back: Write the turn back after a successful reply (static control).
        write: ``await`` the write-back, or run it in the ``background``.
        timeout: Seconds each memory call may take.
        failure_mode: ``fail_open`` (default) or ``fail_closed``.
        token_env: Environment variable holding the service's bearer token (a secret).
        tls: TLS to the service: ``ca_cert``, and for mTLS ``client_cert`` and
            ``client_key`` (file paths); plaintext when unset.
        hint_template: The recalled memories' text, with one ``{memories}``.
        prompt_note: The system-prompt note of agent control.
        max_background: Background writes in flight at most; beyond, a write is awaited.
    """

    subscriptions: Mapping[str, tuple[str, ...]] = {"on_reply": (), "on_reasoning": ()}
    hook_modes: Mapping[str, HookMode] = {"on_reply": "pre_only"}

    def __init__(
        self,
        target: str = "",
        *,
        store: Memories | None = None,
        mode: ControlMode = "both",
        user_id: str = "",
        agent_id: str = "",
        session_as_user: bool = False,
        scope_from_metadata: bool = False,
        search_by_agent: bool = True,
        top_k: int = 5,
        score_threshold: float = DEFAULT_RECALL_THRESHOLD,
        write_back: bool = True,
        write: WriteMode = "await",
        timeout: float = 10.0,
        failure_mode: FailureMode = "fail_open",
        token_env: str | None = None,
        tls: Mapping[str, str] | None = None,
        hint_template: str = DEFAULT_HINT_TEMPLATE,
        prompt_note: str = DEFAULT_PROMPT_NOTE,
        max_background: int = 64,
    ) -> None:
        if bool(target) == (store is not None):
            raise ValueError("give a memory service target or an in-process store (one of them)")
        if mode not in _HOOKS:
            raise ValueError(f"mode must be one of {', '.join(_HOOKS)}, not {mode!r}")
        if write not in ("await", "background"):
            raise ValueError(f"write must be 'await' or 'background', not {write!r}")
        if failure_mode not in ("fail_open", "fail_closed"):
            raise ValueError(
                f"failure_mode must be 'fail_open' or 'fail_closed', not {failure_mode!r}"
            )
        if not 1 <= top_k <= 50:
            raise ValueError("top_k must be 1-50")
        if not -1 <= score_threshold <= 1:
            raise ValueError("score_threshold must be a cosine, -1 to 1")
        if timeout <= 0 or max_background < 0:
            raise ValueError("timeout must be positive and max_background not negative")
        if hint_template.count("{memories}") != 1:
            raise ValueError("hint_template must contain {memories} exactly once")
        self.target = target
        self.store = store
        self.mode: ControlMode = mode
        self.user_id = user_id
        self.agent_id = agent_id
        self.session_as_user = session_as_user
        self.scope_from_metadata = scope_from_metadata
        self.search_by_agent = search_by_agent
        self.top_k = top_k
        self.score_threshold = score_threshold
        self.write_back = write_back
        self.write: WriteMode = write
        self.timeout = timeout
        self.failure_mode = failure_mode
        self.token_env = token_env
        self.tls = ClientTLS(**tls) if tls else None
        self.hint_template = hint_template
        self.prompt_note = prompt_note
        self.max_background = max_background
        self._hooks = _HOOKS[mode]
        self._tools = self.memory_tools() if mode != "static_control" else []
        self._client: MemoryClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def middleware_key(self) -> str:
        return "memory"

    def implements(self, hook: str) -> bool:
        return hook in self._hooks and super().implements(hook)

    def list_tools(self) -> list[Tool]:
        return list(self._tools)

    def _scope(self, agent: AgentView, inputs: Sequence[Message]) -> dict[str, Any] | None:
        user = agent_id = None
        if self.scope_from_metadata:
            user = _metadata_id(inputs, "user_id")
            agent_id = _metadata_id(inputs, "agent_id")
        session = agent.session_id or None
        user = user or agent.user_id or self.user_id
        user = user or (session if self.session_as_user else None)
        if not user:
            return None
        return {
            "user_id": user,
            "agent_id": agent_id or self.agent_id or None,
            "session_id": session,
        }

    # --- hooks -----------------------------------------------------------------------------

    def on_reply(
        self, agent: AgentView, kwargs: ReplyArgs, next_handler: ReplyNext
    ) -> AsyncIterator[AgentEvent]:
        """Before the reply: resolve the user, agent and session, and keep the user's turn.

        Wraps the whole reply but sees none of its events (zero per-event cost; one round
        trip through a sidecar). Inputs without an id get one here, which the agent keeps.
        """
        if kwargs.get("resume") is None:
            inputs: list[Message] = list(kwargs.get("inputs") or ())
            for msg in inputs:
                if not msg.id:
                    msg.id = new_id()
            state = self.state(agent)
            state.clear()
            state["scope"] = self._scope(agent, inputs)
            state["turn"] = [
                {"id": m.id, "text": text_of(m)} for m in inputs if is_user(m) and text_of(m)
            ]
        return next_handler()

    async def on_reasoning(
        self, agent: AgentView, kwargs: ReasoningArgs, next_handler: ReasoningNext
    ) -> AsyncIterator[AgentEvent]:
        """Wraps each reasoning step: recall at the first, show the recalled facts at each.

        The search runs once per reply (before the first model call); its facts are added to
        the context as a hint before every step and removed after it, even on error.
        Failures follow `failure_mode`.
        """
        state = self.state(agent)
        scope = state.get("scope")
        first = scope is not None and "recalled" not in state
        if scope is not None and first:
            state["recalled"] = []
            query = "\n".join(t["text"] for t in state.get("turn", ()))[-_MAX_QUERY_CHARS:]
            if query.strip():
                try:
                    hits = await self._call(
                        "search",
                        self.backend().search(
                            query,
                            self._search_scope(scope),
                            top_k=self.top_k,
                            score_threshold=self.score_threshold,
                        ),
                    )
                    state["recalled"] = [h.memory.text for h in hits]
                except MemoryUnavailableError as exc:
                    yield self._warning(agent, exc)
        recalled: list[str] = state.get("recalled") or []
        if not recalled:
            async for event in next_handler():
                yield event
            return
        text = self.hint_template.format(memories="\n".join(f"- {t}" for t in recalled))
        hint_id = f"{agent.reply_id}-memory"
        agent.state.context.append(make_hint(agent.kind, text, self.middleware_key(), id=hint_id))
        try:
            if first:
                yield HintBlockEvent(
                    reply_id=agent.reply_id, block_id=hint_id, text=text, source="memory"
                )
            async for event in next_handler():
                yield event
        finally:
            agent.state.context[:] = [m for m in agent.state.context if m.id != hint_id]

    async def after_agent(self, agent: AgentView, final: Message) -> None:
        """After a successful reply: write the user's turn and the final answer back.

        Awaited (failures follow `failure_mode`) or, with ``write="background"``, a tracked
        task (failures are logged). Never runs after an error, interrupt or pause.
        """
        from hookmesh.memory import MemoryScope

        state = self.state(agent)
        scope, turn = state.get("scope"), state.get("turn")
        if not self.write_back or not scope or not turn:
            return
        messages = [make_user_text(agent.kind, t["text"], id=t["id"]) for t in turn]
        answer = text_of(final)
        if answer:
            messages.append(make_assistant(agent.kind, answer, id=final.id))
        target = MemoryScope(scope["user_id"], scope["agent_id"], scope["session_id"])
        write = self._call("write", self.backend().add(target, messages=messages))
        if self.write == "background" and self._write_later(write):
            return
        try:
            await write
        except MemoryUnavailableError as exc:
            agent.emit(self._warning(agent, exc))


__all__ = [
    "DEFAULT_HINT_TEMPLATE",
    "DEFAULT_PROMPT_NOTE",
    "DEFAULT_RECALL_THRESHOLD",
    "WARNING_EVENT",
    "ControlMode",
    "MemoryMiddleware",
    "MemoryUnavailableError",
    "WriteMode",
]
