"""ShadowMiddleware: the live middleware, with a candidate version that sees the same
invocations and whose decisions are compared with the live ones but never applied."""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from pydantic import TypeAdapter

from hookmesh.middleware import AgentView, FailureMode, Middleware, MiddlewareDescription
from hookmesh.models import ModelResponse
from hookmesh.remote._comparison import Trace, disagreement, dump, dump_context, shared_prefix
from hookmesh.remote._rollout import Disagreement
from hookmesh.schema import AgentEvent, Message
from hookmesh.tools import Tool

Record = Callable[[float, Disagreement | None, bool], None]
"""Takes a shadow invocation's latency, its disagreement (None: agreed) and whether the
candidate failed."""

_END = object()
_CONTEXT: TypeAdapter[list[Message]] = TypeAdapter(list[Message])


class _NotCalled(Exception):
    """The live middleware never called next: the candidate's call has nothing to get."""


class _ShadowState:
    def __init__(self, context: list[Message], middle_context: dict[str, Any]) -> None:
        self.context = context
        self.middle_context = middle_context


class _ShadowView:
    """The agent as the candidate sees it: a copy of the live middleware's state slice (as
    its own, under its key) and of the context (even one without needs_context may append
    hints); events it emits are collected, never added to the reply."""

    def __init__(self, agent: AgentView, live_key: str, key: str) -> None:
        self._agent = agent
        # NOTE(hookmesh): seeded from the live slice: the candidate's writes go to copies,
        # so one under another key would otherwise start empty at every invocation.
        slice_ = agent.state.middle_context.get(live_key, {}).get(agent.reply_id, {})
        # NOTE(hookmesh): the context is snapshotted as JSON on the live side's time (a
        # quarter of the cost of deep copies of its messages) and rebuilt into the
        # candidate's own messages when the candidate first reads its state, in its task.
        self._snapshot = _CONTEXT.dump_json(agent.state.context)
        self._slices = {key: {agent.reply_id: copy.deepcopy(slice_)}}
        self._state: _ShadowState | None = None
        self.emitted: list[AgentEvent] = []
        self.waited = 0.0
        """Seconds the candidate spent waiting for the live downstream (not its latency)."""
        self.downstream: tuple[int, list[Message]] | None = None
        """What the live downstream did to the context: how many leading messages it kept,
        and copies of the ones after them once it ended."""

    @property
    def state(self) -> _ShadowState:
        """The candidate's copies of the state slice and of the context."""
        if self._state is None:
            self._state = _ShadowState(_CONTEXT.validate_json(self._snapshot), self._slices)
        return self._state

    def left_by_downstream(self, handed: list[str], context: list[Message]) -> None:
        """Note what the live downstream changed in `context`, the live side having handed
        it `handed` (copying only the messages from the first that differs: the context is
        compared and copied on the live side's time)."""
        if self.downstream is None:
            kept = shared_prefix(handed, dump_context(context))
            self.downstream = (kept, _copies(context[kept:]))

    async def wait(self, downstream: Awaitable[Any]) -> Any:
        """`downstream`'s result, its wait counted in `waited`."""
        asked = time.perf_counter()
        try:
            return await downstream
        finally:
            self.waited += time.perf_counter() - asked

    def caught_up(self) -> None:
        """Make the candidate's copy what the live downstream left in the context, so the
        two sides' edits after next start from the same context and a same version agrees."""
        if self.downstream is not None:
            kept, added = self.downstream
            self.state.context[:] = [*self.state.context[:kept], *added]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._agent, name)

    def emit(self, event: AgentEvent) -> None:
        self.emitted.append(event)


class ShadowMiddleware(Middleware):
    """`live`, with `candidate` as its shadow: each invocation of a hook both implement runs
    on both; the candidate's downstream is what the live one's downstream produced (no model
    call or tool runs twice), and what the candidate decides (events, overrides, short
    circuits, results, its state slice, its context edits, errors) is compared and recorded,
    never applied: it works on copies of its state slice and of the context. Its context
    edits are compared as the context each side handed to next and the one it ended with;
    when the live downstream ends, the candidate's copy takes the context it left, so what
    the downstream added is no edit of either side. The live side never waits for the
    candidate.

    Experimental: the agent service builds it from a remote entry's ``rollout``
    (docs/rollout.md); it wraps any two middlewares.

    Args:
        live: The middleware whose decisions apply.
        candidate: The version under trial.
        record: Called once per shadowed invocation, when both sides ended.
    """

    def __init__(self, live: Middleware, candidate: Middleware, record: Record) -> None:
        self.live = live
        self.candidate = candidate
        self._record = record
        self._pending: set[asyncio.Task[None]] = set()

    @property
    def failure_mode(self) -> FailureMode:  # type: ignore[override]
        return self.live.failure_mode

    @property
    def needs_context(self) -> bool:  # type: ignore[override]
        return self.live.needs_context

    def middleware_key(self) -> str:
        return self.live.middleware_key()

    def implements(self, hook: str) -> bool:
        return self.live.implements(hook)

    def describe(self) -> MiddlewareDescription:
        return self.live.describe()

    def list_tools(self) -> list[Tool]:
        return self.live.list_tools()

    def _view(self, agent: AgentView) -> _ShadowView:
        return _ShadowView(agent, self.live.middleware_key(), self.candidate.middleware_key())

    def _shadows(self, hook: str) -> bool:
        return self.candidate.implements(hook)

    def _compare(
        self,
        hook: str,
        agent: AgentView,
        traces: tuple[Trace, Trace],
        run: Callable[[], Awaitable[list[str]]],
        view: _ShadowView,
    ) -> asyncio.Future[None]:
        """Run the candidate's side in the background and record it once the live side's
        `done` future (returned) is set too."""
        live, mine = traces
        took = 0.0

        async def shadow() -> None:
            nonlocal took
            started = time.perf_counter()
            try:
                mine.output = await run()
            except Exception as exc:
                mine.error = f"{type(exc).__name__}: {exc}"
            took = time.perf_counter() - started - view.waited
            mine.output.extend(dump(e) for e in view.emitted)
            slice_ = view.state.middle_context[self.candidate.middleware_key()][agent.reply_id]
            mine.state = dump(slice_)
            mine.context = dump_context(view.state.context)

        task = asyncio.ensure_future(shadow())
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        async def judge() -> None:
            try:
                await task
                await done
            finally:
                task.cancel()
            found = disagreement(hook, agent.reply_id, live, mine)
            failed = bool(mine.error) and (found is None or found.kind != "short_circuit")
            self._record(took, found, failed)

        judging = asyncio.ensure_future(judge())
        self._pending.add(judging)
        judging.add_done_callback(self._pending.discard)
        return done

    def _live_state(self, agent: AgentView) -> str:
        by_reply = agent.state.middle_context.get(self.live.middleware_key(), {})
        return dump(by_reply.get(agent.reply_id, {}))

    # --- event hooks -----------------------------------------------------------------------

    def on_reply(self, agent: AgentView, kwargs: Any, next_handler: Any) -> Any:
        return self._events("on_reply", agent, kwargs, next_handler)

    def on_reasoning(self, agent: AgentView, kwargs: Any, next_handler: Any) -> Any:
        return self._events("on_reasoning", agent, kwargs, next_handler)

    def on_acting(self, agent: AgentView, kwargs: Any, next_handler: Any) -> Any:
        return self._events("on_acting", agent, kwargs, next_handler)

    async def _events(
        self, hook: str, agent: AgentView, kwargs: Any, next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        live_hook = getattr(self.live, hook)
        if not self._shadows(hook):
            async for event in live_hook(agent, kwargs, next_handler):
                yield event
            return
        feed: asyncio.Queue[Any] = asyncio.Queue()
        trace = Trace()

        async def tee_next(**overrides: Any) -> AsyncIterator[AgentEvent]:
            trace.called_next, trace.overrides = True, dump(overrides)
            trace.handed = dump_context(agent.state.context)
            try:
                async for event in next_handler(**overrides):
                    feed.put_nowait(copy.deepcopy(event))
                    yield event
            finally:
                view.left_by_downstream(trace.handed, agent.state.context)
                feed.put_nowait(_END)

        async def replay_next(**overrides: Any) -> AsyncIterator[AgentEvent]:
            mine.called_next, mine.overrides = True, dump(overrides)
            mine.handed = dump_context(view.state.context)
            while (event := await view.wait(feed.get())) is not _END:
                yield event
            feed.put_nowait(_END)  # a second call gets nothing either
            view.caught_up()

        view = self._view(agent)
        mine = Trace()
        own_kwargs = copy.deepcopy(kwargs)

        async def run() -> list[str]:
            events = getattr(self.candidate, hook)(view, own_kwargs, replay_next)
            return [dump(e) async for e in events]

        done = self._compare(hook, agent, (trace, mine), run, view)
        try:
            async for event in live_hook(agent, kwargs, tee_next):
                trace.output.append(dump(event))
                yield event
        except Exception as exc:
            trace.error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            feed.put_nowait(_END)
            trace.state = self._live_state(agent)
            trace.context = dump_context(agent.state.context)
            done.set_result(None)

    # --- result hooks ----------------------------------------------------------------------

    async def on_model_call(self, agent: AgentView, kwargs: Any, next_handler: Any) -> Any:
        return await self._result("on_model_call", agent, kwargs, next_handler)

    async def on_check_permission(self, agent: AgentView, kwargs: Any, next_handler: Any) -> Any:
        return await self._result("on_check_permission", agent, kwargs, next_handler)

    async def on_compress_context(self, agent: AgentView, kwargs: Any, next_handler: Any) -> Any:
        """The candidate compresses its copy of the context; the two contexts are compared
        (kind ``context``), the candidate's is never applied."""
        if not self._shadows("on_compress_context"):
            return await self.live.on_compress_context(agent, kwargs, next_handler)
        downstream: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        trace, side = Trace(), Trace()

        async def tee_next() -> None:
            trace.called_next = True
            trace.handed = dump_context(agent.state.context)
            await next_handler()
            if not downstream.done():
                view.left_by_downstream(trace.handed, agent.state.context)
                downstream.set_result(None)

        async def replay_next() -> None:
            side.called_next = True
            side.handed = dump_context(view.state.context)
            await view.wait(asyncio.shield(downstream))
            view.caught_up()

        view = self._view(agent)
        own_kwargs = copy.deepcopy(kwargs)

        async def run() -> list[str]:
            await self.candidate.on_compress_context(view, own_kwargs, replay_next)  # type: ignore[arg-type]
            return []

        done = self._compare("on_compress_context", agent, (trace, side), run, view)
        try:
            return await self.live.on_compress_context(agent, kwargs, tee_next)
        except Exception as exc:
            trace.error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            _settle(downstream, trace, agent, self, done)

    async def _result(self, hook: str, agent: AgentView, kwargs: Any, next_handler: Any) -> Any:
        live_hook = getattr(self.live, hook)
        if not self._shadows(hook):
            return await live_hook(agent, kwargs, next_handler)
        downstream: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        trace = Trace()
        chunks: asyncio.Queue[Any] = asyncio.Queue()

        async def tee_next(**overrides: Any) -> Any:
            trace.called_next, trace.overrides = True, dump(overrides)
            trace.handed = dump_context(agent.state.context)
            result = await next_handler(**overrides)
            if downstream.done():  # called again (a retry): the candidate had the first
                return result
            view.left_by_downstream(trace.handed, agent.state.context)
            if hasattr(result, "__aiter__"):
                result = _tee(result, chunks)
                downstream.set_result(_replay(chunks, view))
            else:
                downstream.set_result(copy.deepcopy(result))
            return result

        async def replay_next(**overrides: Any) -> Any:
            side.called_next, side.overrides = True, dump(overrides)
            side.handed = dump_context(view.state.context)
            result = await view.wait(asyncio.shield(downstream))
            view.caught_up()
            return result

        view = self._view(agent)
        side = Trace()
        own_kwargs = copy.deepcopy(kwargs)

        async def run() -> list[str]:
            result = await getattr(self.candidate, hook)(view, own_kwargs, replay_next)
            return await _outputs(result)

        done = self._compare(hook, agent, (trace, side), run, view)
        try:
            result = await live_hook(agent, kwargs, tee_next)
        except Exception as exc:
            trace.error = f"{type(exc).__name__}: {exc}"
            _settle(downstream, trace, agent, self, done)
            raise
        if hasattr(result, "__aiter__"):
            return _recorded(result, trace, lambda: _settle(downstream, trace, agent, self, done))
        trace.output = await _outputs(result)
        _settle(downstream, trace, agent, self, done)
        return result

    # --- unary hooks -----------------------------------------------------------------------

    async def on_system_prompt(self, agent: AgentView, prompt: str) -> str:
        if not self._shadows("on_system_prompt"):
            return await self.live.on_system_prompt(agent, prompt)
        view = self._view(agent)  # before the live side edits the originals
        result = await self.live.on_system_prompt(agent, prompt)

        async def run() -> list[str]:
            return [await self.candidate.on_system_prompt(view, prompt)]  # type: ignore[arg-type]

        trace = Trace(
            output=[result],
            state=self._live_state(agent),
            context=dump_context(agent.state.context),
        )
        self._compare("on_system_prompt", agent, (trace, Trace()), run, view).set_result(None)
        return result

    async def after_agent(self, agent: AgentView, final: Message) -> None:
        if not self._shadows("after_agent"):
            return await self.live.after_agent(agent, final)
        view = self._view(agent)  # before the live side edits the originals
        own_final = final.model_copy(deep=True)
        trace = Trace()
        try:
            await self.live.after_agent(agent, final)
        except Exception as exc:
            trace.error = f"{type(exc).__name__}: {exc}"
            raise
        finally:

            async def run() -> list[str]:
                await self.candidate.after_agent(view, own_final)  # type: ignore[arg-type]
                return []

            trace.state = self._live_state(agent)
            trace.context = dump_context(agent.state.context)
            self._compare("after_agent", agent, (trace, Trace()), run, view).set_result(None)

    async def settled(self) -> None:
        """Wait for the comparisons still running (the candidate has its own deadlines)."""
        while self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)

    async def aclose(self, grace: float = 5.0) -> None:
        """Let the comparisons still running end (for up to `grace` s; the rest, such as one
        whose live model stream was never read, are cancelled) before the candidate closes."""
        pending = set(self._pending)
        if pending:
            _, late = await asyncio.wait(pending, timeout=grace)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)


def _settle(
    downstream: asyncio.Future[Any],
    trace: Trace,
    agent: AgentView,
    shadow: ShadowMiddleware,
    done: asyncio.Future[None],
) -> None:
    if not downstream.done():
        downstream.set_exception(_NotCalled())
    trace.state = shadow._live_state(agent)
    trace.context = dump_context(agent.state.context)
    if not done.done():
        done.set_result(None)


def _copies(context: list[Message]) -> list[Message]:
    return [m.model_copy(deep=True) for m in context]


async def _tee(stream: Any, chunks: asyncio.Queue[Any]) -> AsyncIterator[Any]:
    try:
        async for chunk in stream:
            chunks.put_nowait(copy.deepcopy(chunk))
            yield chunk
    finally:
        chunks.put_nowait(_END)


async def _replay(chunks: asyncio.Queue[Any], view: _ShadowView) -> AsyncIterator[Any]:
    while (chunk := await view.wait(chunks.get())) is not _END:
        yield chunk


async def _recorded(stream: Any, trace: Trace, ended: Callable[[], None]) -> AsyncIterator[Any]:
    try:
        async for chunk in stream:
            trace.output.append(dump(chunk))
            yield chunk
    except Exception as exc:
        trace.error = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        ended()


async def _outputs(result: Any) -> list[str]:
    if hasattr(result, "__aiter__"):
        return [dump(chunk) async for chunk in result]
    if isinstance(result, ModelResponse):
        return dump_context([result.message])
    return [dump(result)]
