"""Declared order: a middleware may have to run before or after others, named by key; the
chain keeps the configured order wherever the declarations allow it."""

from __future__ import annotations

import heapq
from collections.abc import Sequence


def declared_order(
    keys: Sequence[str], before: Sequence[Sequence[str]], after: Sequence[Sequence[str]]
) -> list[int]:
    """The positions of `keys` in chain order (outermost first): every ``before`` of an entry
    is inside it, every ``after`` outside it, and otherwise the configured order stands, so
    the same config always gives the same chain.

    Args:
        keys: Each entry's middleware key, in configured order.
        before: Per entry, the keys it must run before (wrap: be outside of).
        after: Per entry, the keys it must run after (be inside of).

    Raises:
        ValueError: A declaration names a key no entry has, or the declarations contradict
            each other (the message names the middlewares in the cycle).
    """
    index: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        index.setdefault(key, []).append(i)
    edges: dict[int, set[int]] = {i: set() for i in range(len(keys))}
    for i in range(len(keys)):
        for names, outer_first in ((before[i], True), (after[i], False)):
            for name in names:
                if name not in index:
                    known = ", ".join(sorted(k for k in index if k)) or "none"
                    side = "before" if outer_first else "after"
                    raise ValueError(
                        f"middlewares[{i}] ({keys[i]}): {side} names {name!r}, which no "
                        f"middleware has; keys: {known}"
                    )
                for j in index[name]:
                    if j != i:
                        edges[i if outer_first else j].add(j if outer_first else i)
    incoming = {i: 0 for i in edges}
    for targets in edges.values():
        for j in targets:
            incoming[j] += 1
    ready = [i for i, n in incoming.items() if n == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for j in sorted(edges[i]):
            incoming[j] -= 1
            if incoming[j] == 0:
                heapq.heappush(ready, j)
    if len(order) < len(keys):
        raise ValueError(
            f"the middlewares' order declarations contradict: {_cycle(keys, edges, set(order))}"
        )
    return order


def _cycle(keys: Sequence[str], edges: dict[int, set[int]], placed: set[int]) -> str:
    """One cycle among the entries left unplaced, as ``a before b before … a``: each of them
    still waits for an unplaced one, so walking back along those waits must loop."""
    waits = {i: sorted(j for j in edges if j not in placed and i in edges[j]) for i in edges}
    node = min(i for i in edges if i not in placed)
    seen: dict[int, int] = {}
    path: list[int] = []
    while node not in seen:
        seen[node] = len(path)
        path.append(node)
        node = waits[node][0]
    loop = [*path[seen[node] :], node]
    return " before ".join(keys[i] for i in reversed(loop))
