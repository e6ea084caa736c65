"""The length guardrail: bounds on how long a text may be, in characters and in UTF-8 bytes."""

from __future__ import annotations

from typing import Any

from hookmesh.middleware import AgentView
from hookmesh.middleware.builtin.guardrails._base import Guardrail, GuardrailSubject, Verdict


class LengthGuardrail(Guardrail):
    """Trips when the text is shorter than `min_chars`, longer than `max_chars`, or larger
    than `max_bytes` in UTF-8 (a tool's result, a pasted document).

    A plain function: as a blocking input guardrail it costs a reply no work per event.

    Args:
        max_chars: Most characters; None for no limit.
        min_chars: Fewest characters (e.g. 1: no empty answer).
        max_bytes: Most UTF-8 bytes; None for no limit.
        **options: `Guardrail` options: stages, mode, name, tools, failure_mode.

    Raises:
        ValueError: No limit, or a negative one.

    Example:
        >>> LengthGuardrail(max_chars=4000, stages=("input",))
    """

    default_name = "length"

    def __init__(
        self,
        *,
        max_chars: int | None = None,
        min_chars: int = 0,
        max_bytes: int | None = None,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        if max_chars is None and max_bytes is None and not min_chars:
            raise ValueError("give max_chars, min_chars or max_bytes")
        if min(max_chars or 0, min_chars, max_bytes or 0) < 0:
            raise ValueError("limits cannot be negative")
        self.max_chars = max_chars
        self.min_chars = min_chars
        self.max_bytes = max_bytes

    def check(self, agent: AgentView, subject: GuardrailSubject) -> Verdict:
        size = len(subject.text)
        if self.max_chars is not None and size > self.max_chars:
            return f"it is {size} characters long; the limit is {self.max_chars}"
        if size < self.min_chars:
            return f"it is {size} characters long; at least {self.min_chars} are needed"
        if self.max_bytes is not None:
            encoded = len(subject.text.encode())
            if encoded > self.max_bytes:
                return f"it is {encoded} bytes; the limit is {self.max_bytes}"
        return None
