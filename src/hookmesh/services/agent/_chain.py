"""The agent's middleware chain as generations: built from config, swapped live, closed when
the last reply that started on it ends."""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any

from hookmesh.middleware import Middleware, declared_order
from hookmesh.remote import ClientTLS, Rollout, load_middleware
from hookmesh.services.agent._config import (
    AgentServiceConfig,
    LocalMiddlewareConfig,
    LocalRolloutConfig,
    RolloutConfig,
)
from hookmesh.services.agent._rollouts import connect_candidate, connect_remote, make_rollout


class MiddlewareChain:
    """One generation of middlewares, outermost first, and the resources they hold.

    A reply takes the chain current at its start (`acquire`) and keeps it to its end
    (`release`), so a swap never changes a running reply. A retired chain closes its
    middlewares (sidecar channels, local `aclose`) once no reply uses it.

    Args:
        generation: 1 for the chain built at start, then one more per reload.
        middlewares: The instances.
        resources: Closes them.
        rollouts: Candidate versions of some of them, each chosen per session.
    """

    def __init__(
        self,
        generation: int,
        middlewares: list[Middleware],
        resources: AsyncExitStack,
        rollouts: list[Rollout] | None = None,
    ) -> None:
        self.generation = generation
        self.middlewares = middlewares
        self.rollouts = rollouts or []
        self._resources = resources
        self._users = 0
        self._retired = False
        self.closed = False
        """Whether its middlewares have been closed."""

    @property
    def users(self) -> int:
        """Replies running on this chain."""
        return self._users

    def keys(self) -> list[str]:
        """The middleware keys, outermost first."""
        return [mw.middleware_key() for mw in self.middlewares]

    def middlewares_for(self, session_id: str) -> list[Middleware]:
        """The middlewares a reply of the session runs with: decided once per reply, and
        the chain itself when no rollout is configured."""
        if not self.rollouts:
            return self.middlewares
        out = list(self.middlewares)
        for rollout in self.rollouts:
            out[rollout.index] = rollout.choose(session_id)
        return out

    def landed(self, session_id: str, failed: bool) -> None:
        """A reply of the session that ran on this chain ended (canaries count it)."""
        for rollout in self.rollouts:
            rollout.landed(session_id, failed)

    def acquire(self) -> None:
        """A reply starts on this chain."""
        self._users += 1

    async def release(self) -> None:
        """A reply that started on this chain ended."""
        self._users -= 1
        if self._retired and self._users == 0:
            await self.close()

    async def retire(self) -> None:
        """No new reply takes this chain; close it once the running ones end."""
        self._retired = True
        if self._users == 0:
            await self.close()

    async def close(self) -> None:
        """Close the middlewares (once)."""
        if not self.closed:
            self.closed = True
            await self._resources.aclose()


async def build_chain(
    config: AgentServiceConfig, sidecars: dict[str, str], generation: int = 1
) -> MiddlewareChain:
    """Instantiate local middlewares and connect remote ones.

    Raises:
        ValueError: An entry names no target, a local middleware cannot be loaded, or the
            order declarations (`before`, `after`) name an unknown key or contradict.
        SidecarError: A ``fail_closed`` sidecar did not describe itself.
    """
    stack = AsyncExitStack()
    out: list[Middleware] = []
    trials: list[tuple[Middleware, RolloutConfig | LocalRolloutConfig, Middleware]] = []
    try:
        for i, entry in enumerate(config.middlewares):
            if isinstance(entry, LocalMiddlewareConfig):
                local = await _load_local(entry.import_path, entry.params, stack)
                out.append(local)
                if entry.rollout is not None:
                    candidate = await _load_local(
                        entry.rollout.import_path, entry.rollout.params, stack
                    )
                    trials.append((local, entry.rollout, candidate))
                continue
            target = entry.target or sidecars.get(entry.sidecar, "")
            if not target:
                known = ", ".join(sidecars) or "none"
                raise ValueError(f"middlewares[{i}]: set target, or sidecar to one of: {known}")
            tls = None
            if entry.tls is not None:
                tls = ClientTLS(
                    entry.tls.ca_cert,
                    entry.tls.client_cert,
                    entry.tls.client_key,
                    entry.tls.server_name,
                )
            remote = await connect_remote(entry, target, tls, stack)
            out.append(remote)
            if entry.rollout is not None:
                trials.append((remote, entry.rollout, await connect_candidate(entry, tls, stack)))
        order = declared_order(
            [mw.middleware_key() for mw in out],
            [entry.before for entry in config.middlewares],
            [entry.after for entry in config.middlewares],
        )
        ordered = [out[i] for i in order]
        rollouts = [
            make_rollout(ordered.index(live), live, candidate, trial, stack)
            for live, trial, candidate in trials
        ]
    except BaseException:
        await stack.aclose()
        raise
    return MiddlewareChain(generation, ordered, stack, rollouts)


async def _load_local(import_path: str, params: dict[str, Any], stack: AsyncExitStack) -> Any:
    """A local middleware, started (e.g. MCP tools connect before the first reply) and closed
    with the chain."""
    local = load_middleware(import_path, **params)
    aclose: Any = getattr(local, "aclose", None)
    if aclose is not None:
        stack.push_async_callback(aclose)
    start: Any = getattr(local, "start", None)
    if start is not None:
        await start()
    return local
