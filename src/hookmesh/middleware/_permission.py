"""A permission decision for one tool call: allow, deny, or ask the user."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True, slots=True)
class PermissionDecision:
    """The outcome of a permission check for one tool call."""

    behavior: Literal["allow", "deny", "ask"]
    """``allow`` runs the call, ``deny`` answers it with a denied result, ``ask`` pauses the
    reply for the user's confirmation."""
    reason: str = ""
    """Why; shown to the model for ``deny`` and to the user for ``ask``."""


ALLOW = PermissionDecision("allow")
ASK = PermissionDecision("ask")
