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

    Patterns are compiled once, here, each list into one RE2 set, so a check is one linear
    pass over the text per list, which also says which patterns matched. `literal` patterns
    are words or phrases (matched as they are, not as regexes). The check is a plain
    function: as a blocking input guardrail it costs a reply no work per event.

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
        self._shown = list(deny)
        self._deny = self._set([re2.escape(p) if literal else p for p in deny], deny)
        self._allow = self._set([re2.escape(p) if literal else p for p in allow], allow)

    def _set(self, patterns: Sequence[str], given: Sequence[str]) -> Any:
        """One RE2 set of `patterns` (a search reports every pattern that matches), or None
        for no patterns."""
        if not patterns:
            return None
        found = re2.Set.SearchSet(self._options)
        for pattern, shown in zip(patterns, given, strict=True):
            try:
                re2.compile(pattern, self._options)
                found.Add(pattern)
            except re2.error as exc:
                raise ValueError(f"invalid pattern {shown!r}: {exc}") from None
        found.Compile()
        return found

    def check(self, agent: AgentView, subject: GuardrailSubject) -> Verdict:
        text = subject.text
        if self._deny is not None:
            matched = self._deny.Match(text)
            if matched:
                return f"it matches the denied pattern {self._shown[min(matched)]!r}"
        if self._allow is not None and not self._allow.Match(text):
            return "it matches none of the allowed patterns"
        return None
