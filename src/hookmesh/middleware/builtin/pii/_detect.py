"""PII detection and replacement: the detectors (regex plus a check such as Luhn or the IBAN
checksum), the four strategies, and a stream masker that holds back no more text than the
longest match could span."""

from __future__ import annotations

import hashlib
import ipaddress
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from hookmesh.errors import HookmeshError

Strategy = Literal["redact", "mask", "hash", "block"]
"""``redact``: ``[REDACTED_EMAIL]``; ``mask``: all but the last 4 letters and digits become
``*``; ``hash``: ``<email:1a2b3c4d5e>`` (SHA-256 prefix, stable); ``block``: refuse."""
STRATEGIES = ("redact", "mask", "hash", "block")


class PIIDetectedError(HookmeshError):
    """Text holds PII of a type whose strategy is ``block``."""

    reason = "PII_DETECTED"


@dataclass(frozen=True, slots=True)
class Detector:
    """One kind of PII: a pattern, a check of each candidate, and the longest match."""

    name: str
    pattern: re.Pattern[str]
    max_length: int
    """Longest text one match may span: what a stream holds back for this detector."""
    check: Callable[[str], bool] | None = None


def _luhn(text: str) -> bool:
    digits = [int(c) for c in text if c.isdigit()]
    if not 13 <= len(digits) <= 19:
        return False
    total = 0
    for i, digit in enumerate(reversed(digits)):
        if i % 2:
            digit *= 2
            digit -= 9 if digit > 9 else 0
        total += digit
    return total % 10 == 0


def _iban(text: str) -> bool:
    raw = text.replace(" ", "").upper()
    if not 15 <= len(raw) <= 34:
        return False
    moved = raw[4:] + raw[:4]
    return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1


def _ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _phone(text: str) -> bool:
    return 7 <= sum(c.isdigit() for c in text) <= 15


BUILTIN: dict[str, Detector] = {
    d.name: d
    for d in (
        Detector(
            "email",
            re.compile(
                r"[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63})*\.[A-Za-z]{2,24}"
            ),
            254,
        ),
        Detector(
            "credit_card",
            re.compile(
                r"(?<![\d-])(?:\d{4}([ -]?)\d{4}\1\d{4}\1\d{4}|\d{4}([ -]?)\d{6}\2\d{5}"
                r"|\d{13,19})(?![\d-])"
            ),
            23,
            _luhn,
        ),
        Detector(
            "iban",
            re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b"),
            42,
            _iban,
        ),
        Detector(
            "ip",
            re.compile(
                r"(?<![\w.:])(?:\d{1,3}(?:\.\d{1,3}){3}|(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4})(?![\w.:])"
            ),
            45,
            _ip,
        ),
        Detector(
            "phone",
            re.compile(
                r"(?<![\w+])(?:\+\d{1,3}[ .-]?(?:\(\d{1,4}\)[ .-]?)?\d{1,4}(?:[ .-]?\d{2,4}){1,4}"
                r"|\(\d{3}\)[ .-]?\d{3}[ .-]?\d{4}|\d{3}[ .-]\d{3}[ .-]\d{4})(?!\w)"
            ),
            32,
            _phone,
        ),
    )
}
"""The built-in detectors, in priority order (an earlier one wins an overlap)."""


@dataclass(frozen=True, slots=True)
class Match:
    """One detected item."""

    start: int
    end: int
    detector: str


class Scrubber:
    """Finds PII in text and replaces it by each type's strategy."""

    def __init__(self, detectors: Sequence[Detector], strategies: Mapping[str, Strategy]) -> None:
        self.detectors = list(detectors)
        self.strategies = dict(strategies)
        self.hold = max(d.max_length for d in self.detectors)
        """The most text a stream holds back: the longest possible match."""

    def find(self, text: str, start: int = 0) -> list[Match]:
        """Non-overlapping matches from `start` on, in order; an earlier detector wins an
        overlap. Text before `start` is context only (for lookbehinds)."""
        taken: list[Match] = []
        for detector in self.detectors:
            pos = start
            while (m := detector.pattern.search(text, pos)) is not None:
                if detector.check is not None and not detector.check(m.group()):
                    pos = m.start() + 1  # a shorter or later candidate may pass
                    continue
                pos = m.end()
                if not any(m.start() < t.end and t.start < m.end() for t in taken):
                    taken.append(Match(m.start(), m.end(), detector.name))
        return sorted(taken, key=lambda t: t.start)

    def replace(self, text: str, matches: Sequence[Match]) -> str:
        """`text` with each match replaced (or PIIDetectedError for a ``block`` type)."""
        if not matches:
            return text
        out: list[str] = []
        at = 0
        for m in matches:
            out.append(text[at : m.start])
            out.append(self._replacement(m.detector, text[m.start : m.end]))
            at = m.end
        out.append(text[at:])
        return "".join(out)

    def scrub(self, text: str) -> str:
        """`text` with every PII item replaced."""
        return self.replace(text, self.find(text))

    def _replacement(self, name: str, value: str) -> str:
        strategy = self.strategies[name]
        if strategy == "redact":
            return f"[REDACTED_{name.upper()}]"
        if strategy == "hash":
            return f"<{name}:{hashlib.sha256(value.encode()).hexdigest()[:10]}>"
        if strategy == "mask":
            keep = 4
            chars = list(value)
            for i in range(len(chars) - 1, -1, -1):
                if chars[i].isalnum():
                    if keep:
                        keep -= 1
                    else:
                        chars[i] = "*"
            return "".join(chars)
        raise PIIDetectedError(
            f"the text holds {name.replace('_', ' ')} data, which is blocked",
            metadata={"piiType": name},
        )


class StreamMasker:
    """Masks one stream of text deltas: emits what can no longer be part of a match and
    holds back at most `Scrubber.hold` characters."""

    __slots__ = ("_buffer", "_context", "_scrubber")

    _CONTEXT = 8
    """Characters already emitted that a pattern's lookbehind may still look at."""

    def __init__(self, scrubber: Scrubber) -> None:
        self._scrubber = scrubber
        self._buffer = ""
        self._context = ""

    @property
    def held(self) -> int:
        """Characters received but not emitted yet."""
        return len(self._buffer)

    def feed(self, delta: str) -> str:
        """The masked text that is safe to emit after `delta` arrived ('' if none yet)."""
        buffer = self._buffer + delta
        cut = len(buffer) - self._scrubber.hold
        if cut <= 0:
            self._buffer = buffer
            return ""
        # A match that starts before the cut is complete: it cannot reach past the buffer.
        matches = self._scan(buffer)
        for m in matches:
            if m.start < cut < m.end:
                cut = m.end
        return self._emit(buffer, cut, [m for m in matches if m.end <= cut])

    def flush(self) -> str:
        """Everything held back, masked (the stream ended)."""
        buffer = self._buffer
        return self._emit(buffer, len(buffer), self._scan(buffer))

    def _scan(self, buffer: str) -> list[Match]:
        offset = len(self._context)
        found = self._scrubber.find(self._context + buffer, offset)
        return [Match(m.start - offset, m.end - offset, m.detector) for m in found]

    def _emit(self, buffer: str, cut: int, matches: list[Match]) -> str:
        self._buffer = buffer[cut:]
        self._context = (self._context + buffer[:cut])[-self._CONTEXT :]
        return self._scrubber.replace(buffer[:cut], matches)
