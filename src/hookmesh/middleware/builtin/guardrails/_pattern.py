"""The pattern guardrail: deny and allow lists of regular expressions (or literal words), run by
RE2, whose matching takes linear time whatever the pattern or the text (no ReDoS)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import re2

from hookmesh.middleware import AgentView
from hookmesh.middleware.builtin.guardrails._base import Guardrail, GuardrailSubject, Verdict


class PatternGuardrail(Guardrail):
    """Trips when the text matches a deny pattern, or, with an allow list, matches none of it.

    Patterns are compiled once, here, each list into one RE2 alternation, so a check is one
    linear pass over the text per list; which deny pattern matched is worked out only when
    one did. `literal` patterns are words or phrases (matched as they are, not as regexes).
    The check is a plain function: as a blocking input guardrail it costs a reply no work per
    event.

    Args:
        deny: Patterns that trip the guardrail when any of them matches.
        allow: When given, the text must match at least one of these (e.g. the topics an
            agent may take).
        literal: Treat the patterns as literal text.
        ignore_case: Match regardless of case (the default).
        **options: `Guardrail` options: stages, mode, name, tools, failure_mode.

    Raises:
        ValueError: No pattern, or one RE2 refuses (named).

    Example:
        >>> PatternGuardrail(deny=["rm -rf", "DROP TABLE"], literal=True, stages=["tool_arguments"])
    """

    default_name = "pattern"

    def __init__(
        self,
        *,
        deny: Sequence[str] = (),
        allow: Sequence[str] = (),
        literal: bool = False,
        ignore_case: bool = True,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        if not deny and not allow:
            raise ValueError("give deny patterns, allow patterns, or both")
        self._options = re2.Options()
        self._options.log_errors = False
        self._options.case_sensitive = not ignore_case
        self._deny = [self._compile(p, literal) for p in deny]
        self._deny_any = self._union(deny, literal)
        self._allow_any = self._union(allow, literal)

    def _compile(self, pattern: str, literal: bool) -> Any:
        try:
            return re2.compile(re2.escape(pattern) if literal else pattern, self._options)
        except re2.error as exc:
            raise ValueError(f"invalid pattern {pattern!r}: {exc}") from None

    def _union(self, patterns: Sequence[str], literal: bool) -> Any:
        if not patterns:
            return None
        for pattern in patterns:  # each named when it is the one RE2 refuses
            self._compile(pattern, literal)
        parts = (re2.escape(p) if literal else p for p in patterns)
        return re2.compile("|".join(f"(?:{p})" for p in parts), self._options)

    def check(self, agent: AgentView, subject: GuardrailSubject) -> Verdict:
        text = subject.text
        if self._deny_any is not None and self._deny_any.search(text):
            pattern = next(r.pattern for r in self._deny if r.search(text))
            return f"it matches the denied pattern {pattern!r}"
        if self._allow_any is not None and not self._allow_any.search(text):
            return "it matches none of the allowed patterns"
        return None
