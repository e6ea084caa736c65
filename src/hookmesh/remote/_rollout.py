"""Rollout of a new middleware version: which sessions a candidate sees, what it did, and the
canary's automatic rollback."""

from __future__ import annotations

import hashlib
import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Literal

from hookmesh.metrics import record_canary_reply, record_shadow_comparison
from hookmesh.middleware import Middleware

log = logging.getLogger("hookmesh.rollout")

RolloutMode = Literal["shadow", "canary"]
RolloutState = Literal["active", "promoted", "rolled_back"]

_BUCKETS = 10_000
"""Share resolution: a session falls in one of this many buckets."""


def session_bucket(session_id: str) -> int:
    """The session's bucket in [0, 10000): the first bytes of SHA-256 of its id, so every
    replica and every restart puts a session in the same bucket (sticky without state)."""
    digest = hashlib.sha256(session_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") % _BUCKETS


@dataclass(frozen=True)
class RolloutSettings:
    """How a candidate is rolled out (the `rollout` of a remote middleware entry)."""

    mode: RolloutMode
    """``shadow``: it sees the traffic, nothing it decides is applied; ``canary``: it serves."""
    share: float
    """Fraction of sessions (0-1) it shadows or serves, chosen by `session_bucket`."""
    max_failed_share: float | None = None
    """Canary: roll back at once when more than this fraction of its replies failed."""
    min_replies: int = 20
    """Canary: replies it must have served before the failed share is judged."""
    sample_size: int = 20
    """Shadow: most recent disagreements kept for inspection."""


@dataclass(frozen=True)
class Disagreement:
    """One invocation where the candidate decided otherwise than the live middleware."""

    hook: str
    """The hook invoked."""
    kind: str
    """``events``, ``overrides``, ``short_circuit``, ``result``, ``prompt``, ``state`` or
    ``error``."""
    reply_id: str
    """The reply it happened in."""
    live: str
    """What the live middleware did, shortened."""
    candidate: str
    """What the candidate did instead, shortened."""


@dataclass
class ShadowStats:
    """What a shadow candidate did against the live middleware."""

    sample_size: int
    compared: int = 0
    agreed: int = 0
    errors: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)
    latencies: deque[float] = field(default_factory=lambda: deque(maxlen=1000))
    samples: deque[Disagreement] = field(init=False)

    def __post_init__(self) -> None:
        self.samples = deque(maxlen=self.sample_size)

    def percentile(self, q: float) -> float:
        """The candidate's latency quantile `q` (0-1) over its last 1000 invocations, s."""
        if not self.latencies:
            return 0.0
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Rollout:
    """A candidate version of one middleware of the chain, rolled out by session.

    The decision is made once per reply (`choose`): sessions whose `session_bucket` falls in
    the share get the candidate (canary) or the live middleware wrapped with the candidate
    as its shadow; the others get the live middleware unchanged. `promote` gives every new
    reply the candidate and `rollback` none; replies running keep what they started with, so
    neither fails a reply. State lives in this process (each replica decides alike, by hash,
    but is promoted or rolled back on its own).

    Args:
        index: The live middleware's position in the ordered chain.
        live: The live middleware.
        candidate: The new version.
        settings: Mode, share and thresholds.
    """

    def __init__(
        self,
        index: int,
        live: Middleware,
        candidate: Middleware,
        settings: RolloutSettings,
    ) -> None:
        self.index = index
        self.live = live
        self.candidate = candidate
        self.settings = settings
        self.shadow: Middleware | None = None
        """The live middleware with the candidate as its shadow (shadow mode; set by the
        chain's builder)."""
        self.stats = ShadowStats(settings.sample_size) if settings.mode == "shadow" else None
        self.state: RolloutState = "active"
        self.reason = ""
        """Why the state last changed (who promoted, or the automatic rollback's figures)."""
        self.canary_replies = 0
        self.canary_failed = 0
        self._cutoff = round(settings.share * _BUCKETS)

    @property
    def key(self) -> str:
        """The live middleware's key, as it is now (a sidecar's is known once it described
        itself, maybe after the chain was built)."""
        return self.live.middleware_key()

    def in_share(self, session_id: str) -> bool:
        """Whether the session is one the candidate shadows or serves while active."""
        return session_bucket(session_id) < self._cutoff

    def choose(self, session_id: str) -> Middleware:
        """The middleware a reply of the session takes at this position."""
        if self.state == "promoted":
            return self.candidate
        if self.state == "rolled_back" or not self.in_share(session_id):
            return self.live
        if self.settings.mode == "canary":
            return self.candidate
        return self.shadow or self.live

    def landed(self, session_id: str, failed: bool) -> None:
        """A reply of the session ended; a canary counts it and may roll back."""
        if self.settings.mode != "canary" or self.state != "active":
            return
        if not self.in_share(session_id):
            return
        self.canary_replies += 1
        self.canary_failed += failed
        record_canary_reply(self.key, failed)
        limit = self.settings.max_failed_share
        if limit is None or self.canary_replies < self.settings.min_replies:
            return
        if self.canary_failed / self.canary_replies > limit:
            self.state = "rolled_back"
            self.reason = (
                f"automatic: {self.canary_failed} of {self.canary_replies} canary replies "
                f"failed, over the {limit:.0%} allowed"
            )
            log.error("rollout of %s rolled back (%s)", self.key, self.reason)

    def promote(self, principal: str) -> None:
        """Every new reply takes the candidate (from now until the chain is reloaded)."""
        self.state = "promoted"
        self.reason = f"promoted by {principal}"
        log.warning("rollout of %s promoted by %s", self.key, principal)

    def rollback(self, principal: str) -> None:
        """No new reply takes the candidate (from now until the chain is reloaded)."""
        self.state = "rolled_back"
        self.reason = f"rolled back by {principal}"
        log.warning("rollout of %s rolled back by %s", self.key, principal)

    def compared(self, seconds: float, disagreement: Disagreement | None, error: bool) -> None:
        """A shadow invocation ended; record it (shadow mode only)."""
        stats = self.stats
        if stats is None:
            return
        stats.compared += 1
        stats.latencies.append(seconds)
        stats.errors += error
        if disagreement is None:
            stats.agreed += 1
            record_shadow_comparison(self.key, "agree", seconds, error)
            return
        stats.by_kind[disagreement.kind] = stats.by_kind.get(disagreement.kind, 0) + 1
        stats.samples.append(disagreement)
        record_shadow_comparison(self.key, disagreement.kind, seconds, error)
