"""The espeak-ng backend: one subprocess per utterance, PCM read from its stdout as produced."""

from __future__ import annotations

import asyncio
import logging
import re
import struct

from hookmesh.tts._audio import PcmFormat, Voice, VoiceCatalog, VoiceGender
from hookmesh.tts._backend import BackendError
from hookmesh.tts._process import Child, spawn

log = logging.getLogger("hookmesh.tts")

_READ_BYTES = 64 * 1024
_LINE_BYTES = 900  # espeak-ng reads stdin lines into a 1000-byte buffer and splits longer ones
_CATALOG_TIMEOUT = 10.0
_MAX_CHUNK_BYTES = 1 << 20  # header chunks other than data; anything bigger is not espeak-ng's
_OTHER_LANGUAGE = re.compile(r"\((\S+?)\s+\d+\)")
_GENDERS: dict[str, VoiceGender] = {"M": "male", "F": "female"}

NOMINAL_FORMAT = PcmFormat(22050, 1)
"""What espeak-ng produces for its own voices (mbrola voices differ; the header tells)."""


def _not_installed(binary: str) -> BackendError:
    return BackendError(
        f"{binary} is not installed or not executable (Debian: apt-get install espeak-ng)",
        reason="ENGINE_NOT_INSTALLED",
    )


def parse_voices(text: str) -> list[tuple[Voice, str]]:
    """Voices and their voice files from ``espeak-ng --voices`` output (first line: header)."""
    out: list[tuple[Voice, str]] = []
    taken: set[str] = set()
    for line in text.splitlines()[1:]:
        parts = line.split()
        if len(parts) < 5:
            continue
        language, age_gender, name, file = parts[1].lower(), parts[2], parts[3], parts[4]
        others = [code.lower() for code in _OTHER_LANGUAGE.findall(" ".join(parts[5:]))]
        languages = tuple(dict.fromkeys([language, *others]))
        # NOTE(hookmesh): two voices may share a language (yue); the second is named by file.
        voice_name = file if language in taken else language
        taken.add(language)
        gender = _GENDERS.get(age_gender.rpartition("/")[2], "")
        out.append((Voice(voice_name, name.replace("_", " "), languages, gender), file))
    return out


def parse_variants(text: str) -> list[tuple[str, str]]:
    """(variant, display name) pairs from ``espeak-ng --voices=variant`` output."""
    out = []
    for line in text.splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 5 and parts[4].startswith("!v/"):
            out.append((parts[4].removeprefix("!v/"), parts[3]))
    return out


def _lines(text: str) -> list[str]:
    """`text` as stdin lines espeak-ng reads whole: one line, or several split at spaces."""
    words = text.split()
    lines: list[str] = []
    current: list[str] = []
    size = 0
    for word in words:
        while len(word.encode()) > _LINE_BYTES:  # one huge "word": cut it by characters
            head = word[: _LINE_BYTES // 4]
            lines.append(head)
            word = word[len(head) :]
        extra = len(word.encode()) + (1 if current else 0)
        if current and size + extra > _LINE_BYTES:
            lines.append(" ".join(current))
            current, size = [], 0
            extra = len(word.encode())
        current.append(word)
        size += extra
    if current:
        lines.append(" ".join(current))
    return lines


class EspeakBackend:
    """Speech from the espeak-ng command line: text via stdin (never a shell), WAV on stdout.

    Each utterance is one ``espeak-ng --stdout`` process. Whole texts use ``--stdin`` (read to
    the end, then spoken); incremental utterances use line mode, where each written line is
    spoken as soon as it arrives, so one process serves a whole real-time stream. The WAV
    header espeak-ng writes has placeholder sizes: it is parsed for the sample rate, channels
    and sample width, and only the PCM after it is returned.

    `live_pids` lists the processes not yet reaped; `aclose` kills them.

    Args:
        binary: The espeak-ng executable (a name on PATH or a path).
    """

    name = "espeak-ng"
    default_rate = 175
    min_rate = 80
    max_rate = 450

    def __init__(self, binary: str = "espeak-ng") -> None:
        self.binary = binary
        self._catalog: VoiceCatalog | None = None
        self._aliases: dict[str, str] = {}
        self._variants: dict[str, str] = {}
        self._live: dict[int, _EspeakUtterance] = {}
        self._idle: list[asyncio.Future[None]] = []

    @property
    def live_pids(self) -> frozenset[int]:
        """PIDs of espeak-ng processes started and not yet reaped."""
        return frozenset(self._live)

    async def wait_idle(self) -> None:
        """Return once no espeak-ng process is left (bound it with a timeout)."""
        if not self._live:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._idle.append(waiter)
        await waiter

    def _forget(self, pid: int) -> None:
        self._live.pop(pid, None)
        if not self._live:
            waiters, self._idle = self._idle, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    async def _run(self, *args: str) -> str:
        try:
            child = await spawn([self.binary, *args])
        except OSError:
            raise _not_installed(self.binary) from None
        try:
            child.stdin.close()
            async with asyncio.timeout(_CATALOG_TIMEOUT):
                out, err = await asyncio.gather(child.stdout.read(), child.stderr.read())
                code = await child.exited
        finally:
            child.kill()
        if code != 0:
            raise BackendError(f"{self.binary} {' '.join(args)} failed: {err.decode().strip()}")
        return out.decode(errors="replace")

    async def catalog(self) -> VoiceCatalog:
        if self._catalog is not None:
            return self._catalog
        voices = parse_voices(await self._run("--voices"))
        variants = parse_variants(await self._run("--voices=variant"))
        aliases: dict[str, str] = {}
        for voice, file in voices:
            aliases.setdefault(voice.name.lower(), voice.name)
            aliases.setdefault(file.lower(), file)
            aliases.setdefault(voice.display_name.lower().replace(" ", "_"), voice.name)
        for voice, _ in voices:  # other languages last: an own language always wins
            for code in voice.languages[1:]:
                aliases.setdefault(code, code)
        self._aliases = aliases
        self._variants = {}
        for variant, display in variants:
            self._variants.setdefault(variant.lower(), variant)
            self._variants.setdefault(display.lower(), variant)
        self._catalog = VoiceCatalog(
            [voice for voice, _ in voices], list(dict.fromkeys(v for v, _ in variants))
        )
        return self._catalog

    async def resolve_voice(self, voice: str) -> str | None:
        await self.catalog()
        base, plus, variant = voice.strip().partition("+")
        name = self._aliases.get(base.lower().replace(" ", "_")) if base else ""
        if name is None:
            return None
        if not plus:
            return name
        found = self._variants.get(variant.lower())
        if found is None:
            return None
        return f"{name or 'en'}+{found}"

    async def open(self, voice: str, rate: int, *, incremental: bool) -> _EspeakUtterance:
        args = ["--stdout", "-s", str(rate), *(["-v", voice] if voice else [])]
        if not incremental:
            args.append("--stdin")
        try:
            child = await spawn([self.binary, *args])
        except OSError:
            raise _not_installed(self.binary) from None
        utterance = _EspeakUtterance(self, child, incremental)
        self._live[child.pid] = utterance
        return utterance

    async def aclose(self) -> None:
        for utterance in list(self._live.values()):
            await utterance.aclose()


class _EspeakUtterance:
    """One espeak-ng process: text to its stdin, PCM from its stdout."""

    def __init__(self, backend: EspeakBackend, child: Child, incremental: bool) -> None:
        self.format = NOMINAL_FORMAT
        self.pid = child.pid
        self._child = child
        self._stdin = child.stdin
        self._stdout = child.stdout
        self._stderr = child.stderr
        self._incremental = incremental
        self._closed = False
        self._header_read = False
        self._carry = b""
        child.exited.add_done_callback(lambda _: backend._forget(child.pid))

    async def write(self, text: str) -> None:
        if self._closed or self._stdin.is_closing():
            return
        if self._incremental:
            payload = "".join(line + "\n" for line in _lines(text))
        else:
            payload = text.replace("\x00", " ")
        if not payload:
            return
        self._stdin.write(payload.encode())
        try:
            await self._stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            if not self._closed:
                raise BackendError("espeak-ng stopped reading its input") from None

    async def end_input(self) -> None:
        if self._closed or self._stdin.is_closing():
            return
        self._stdin.close()

    async def _header(self) -> PcmFormat | None:
        """Parse the RIFF header up to the data chunk; None when there is no audio at all."""
        try:
            riff = await self._stdout.readexactly(12)
        except asyncio.IncompleteReadError as exc:
            if not exc.partial or self._closed:
                return None
            raise BackendError("espeak-ng wrote a truncated WAV header") from None
        if riff[:4] != b"RIFF" or riff[8:12] != b"WAVE":
            raise BackendError("espeak-ng did not write WAV")
        found: PcmFormat | None = None
        try:
            while True:
                chunk_id, size = struct.unpack("<4sI", await self._stdout.readexactly(8))
                if chunk_id == b"data":
                    break
                if size > _MAX_CHUNK_BYTES:
                    raise BackendError(f"espeak-ng wrote a {size}-byte {chunk_id!r} WAV chunk")
                body = await self._stdout.readexactly(size + (size & 1))
                if chunk_id == b"fmt ":
                    tag, channels, rate, _, _, bits = struct.unpack_from("<HHIIHH", body)
                    if tag not in (1, 0xFFFE) or bits != 16 or channels < 1:
                        raise BackendError(
                            f"espeak-ng wrote {bits}-bit audio (tag {tag}); expected 16-bit PCM"
                        )
                    found = PcmFormat(rate, channels)
        except asyncio.IncompleteReadError:
            if self._closed:
                return None
            raise BackendError("espeak-ng wrote a truncated WAV header") from None
        if found is None:
            raise BackendError("espeak-ng wrote WAV without a fmt chunk")
        return found

    async def read(self) -> bytes:
        if self._closed:
            return b""
        data = await self._read()
        return b"" if self._closed else data

    async def _read(self) -> bytes:
        if not self._header_read:
            self._header_read = True
            found = await self._header()
            if found is None:
                await self._finish()
                return b""
            self.format = found
        frame = self.format.frame_bytes
        while True:
            data = await self._stdout.read(_READ_BYTES)
            if not data:
                await self._finish()
                return b""
            if self._carry:
                data = self._carry + data
            cut = len(data) - len(data) % frame
            self._carry = data[cut:]
            if cut:
                return data[:cut]

    async def _finish(self) -> None:
        code = await asyncio.shield(self._child.exited)
        if code != 0 and not self._closed:
            err = (await self._stderr.read(4096)).decode(errors="replace").strip()
            raise BackendError(f"espeak-ng exited with status {code}: {err or 'no message'}")

    async def aclose(self) -> None:
        self._closed = True
        self._child.kill()  # closing the pipes also wakes a pending read with EOF
        await asyncio.shield(self._child.exited)
