"""How a hook's description routes its downstream items: past the sidecar, to it for a
verdict, or to it read-only."""

from __future__ import annotations

from dataclasses import dataclass

from hookmesh.middleware import ALL, HookSpec

PASS, VERDICT, READ_ONLY = 0, 1, 2
"""How an item travels: not sent; sent and answered by a verdict; sent and never answered."""


@dataclass(frozen=True, slots=True)
class Routes:
    """One hook's mode and how each of its items travels (PASS, VERDICT or READ_ONLY)."""

    mode: str
    named: dict[str, int]
    default: int

    @classmethod
    def of(cls, spec: HookSpec) -> Routes:
        """The routes a hook's spec describes."""
        verdict, passing = set(spec.subscriptions), set(spec.read_only_subscriptions)
        named = {n: READ_ONLY for n in passing if n != ALL}
        named.update({n: VERDICT for n in verdict if n != ALL})
        default = VERDICT if ALL in verdict else READ_ONLY if ALL in passing else PASS
        return cls(spec.mode, named, default)

    def route(self, item: str) -> int:
        """How `item` (an event type, or "chunk") travels."""
        return self.named.get(item, self.default)

    def sends(self, item: str) -> bool:
        """Whether `item` goes to the sidecar at all."""
        return self.named.get(item, self.default) != PASS
