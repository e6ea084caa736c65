"""ReductionMiddleware: truncation with offloading, clearing of old results, the file store."""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hookmesh.agent import Agent, tool
from hookmesh.middleware.builtin.reduction import (
    CLEARED_ARGUMENTS,
    CLEARED_EVENT,
    CLEARED_METADATA_KEY,
    FileStore,
    OffloadStore,
    ReductionMiddleware,
    safe_name,
)
from hookmesh.models import ChatModel, ModelResponse, ScriptedChatModel, ScriptedTurn
from hookmesh.schema import (
    AgenticMessage,
    ImageBlock,
    InlineSource,
    Message,
    MessageKind,
    TextBlock,
    ToolCall,
    ToolResultBlock,
    make_assistant,
    make_tool_result,
    make_user_text,
    text_of,
    tool_calls,
    tool_results,
)
from tests.agent_helpers import SHORT_TIMEOUT, collect, customs
from tests.conftest import Attach

pytestmark = pytest.mark.timeout(30)

_NAME = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9_.-]*$")
_LOCATION = re.compile(r"Full output saved at:\n([^\n]+)\n")


@tool(read_only=True, concurrency_safe=True)
async def pieces(count: int, size: int) -> AsyncIterator[str]:
    """Stream `count` pieces of `size` letters (a, b, c, ...).

    Args:
        count: How many pieces.
        size: Letters per piece.
    """
    for i in range(count):
        yield chr(ord("a") + i % 26) * size


@tool(read_only=True)
async def pictures(size: int, tail: int = 10) -> AsyncIterator[Any]:
    """Text, an image, more text.

    Args:
        size: Letters before the image.
        tail: Letters after it.
    """
    yield "x" * size
    yield ImageBlock(source=InlineSource(data=b"\x89PNG", mime_type="image/png"))
    yield "y" * tail


def _letters(count: int, size: int) -> str:
    return "".join(chr(ord("a") + i % 26) * size for i in range(count))


def _results(agent: Agent) -> list[Any]:
    return [r for m in agent.state.context for r in tool_results(m)]


def _files(root: Path) -> list[Path]:
    """Every file under `root` (sync: tests call it between awaits)."""
    return sorted(p for p in root.resolve().rglob("*") if p.is_file())


def _entries(root: Path) -> list[Path]:
    return sorted(root.iterdir())


def _location(text: str) -> Path:
    found = _LOCATION.findall(text)
    assert found, text
    return Path(found[-1])


def _agent(
    kind: MessageKind, turns: Any, middlewares: Sequence[Any], tools: Sequence[Any] = (pieces,)
) -> Agent:
    return Agent(ScriptedChatModel(turns), kind=kind, tools=tools, middlewares=middlewares)


def test_the_docs_page_lists_every_parameter() -> None:
    page = Path(__file__).parents[3] / "docs" / "middleware" / "reduction.md"
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", page.read_text(), flags=re.M))
    assert documented == set(inspect.signature(ReductionMiddleware).parameters)


# --- construction ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "exactly one of root_dir"),
        ({"root_dir": "r", "store": FileStore("r")}, "exactly one of root_dir"),
        ({"store": object()}, "store must be an OffloadStore"),
        ({"root_dir": 5}, "root_dir must be a directory path"),
        ({"root_dir": ""}, "root_dir must be a directory path"),
        ({"root_dir": "r", "max_length": 0}, "max_length must be an int >= 1"),
        ({"root_dir": "r", "max_length": True}, "max_length must be an int >= 1"),
        ({"root_dir": "r", "preview_chars": -1}, "preview_chars must be an int >= 0"),
        ({"root_dir": "r", "max_length": 10, "preview_chars": 10}, "smaller than max_length"),
        ({"root_dir": "r", "max_tokens_for_clear": 0}, "max_tokens_for_clear must be"),
        ({"root_dir": "r", "keep_recent": -1}, "keep_recent must be an int >= 0"),
        ({"root_dir": "r", "clear_arguments": "yes"}, "clear_arguments must be a bool"),
        ({"root_dir": "r", "exclude_tools": "echo"}, "not one string"),
        ({"root_dir": "r", "exclude_tools": [""]}, "non-empty tool names"),
        ({"root_dir": "r", "read_tool_name": "read file"}, "read_tool_name must be"),
        ({"root_dir": "r", "failure_mode": "open"}, "failure_mode must be"),
    ],
)
def test_parameters_are_validated_at_construction(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ReductionMiddleware(**kwargs)


def test_defaults(tmp_path: Path) -> None:
    mw = ReductionMiddleware(tmp_path)
    assert (mw.max_length, mw.preview_chars, mw.max_tokens_for_clear) == (50_000, 2_000, 160_000)
    assert (mw.keep_recent, mw.clear_arguments, mw.offload_cleared) == (1, False, True)
    assert mw.exclude_tools == frozenset()
    assert [t.name for t in mw.list_tools()] == ["read_tool_output"]
    assert ReductionMiddleware(tmp_path, read_tool_name=None).list_tools() == []
    assert mw.failure_mode == "fail_closed"


# --- the file store ---------------------------------------------------------------------------

HOSTILE_IDS = [
    "../../etc/passwd",
    "/abs/path",
    "..",
    ".",
    "",
    ".hidden",
    "x" * 5000,
    "ünïcødé/../..",
    "a\\..\\b",
    "nul\x00byte",
    "call_1",
]


@pytest.mark.parametrize("call_id", HOSTILE_IDS)
def test_store_paths_stay_under_the_root_with_safe_names(tmp_path: Path, call_id: str) -> None:
    store = FileStore(tmp_path)
    path = store.path_for(("truncated", "reply", call_id))
    assert path.is_relative_to(tmp_path.resolve())
    assert path.parent == tmp_path.resolve() / "truncated" / "reply"
    assert _NAME.match(path.stem) and len(path.name) <= 100
    if call_id == "call_1":
        assert path.name == "call_1.txt"


@given(st.text(), st.text())
def test_safe_names_are_safe_bounded_and_distinct(a: str, b: str) -> None:
    for raw in (a, b):
        name = safe_name(raw)
        assert _NAME.match(name) and len(name) <= 96 and not name.startswith(".")
    if a != b:
        assert safe_name(a) != safe_name(b)


async def test_store_reads_back_and_refuses_paths_outside_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    store = FileStore(root)
    (tmp_path / "secret.txt").write_text("secret")
    async with asyncio.timeout(SHORT_TIMEOUT):
        location = await store.write(("ns", "../../x"), "hello")
        assert await store.read(location) == "hello"
        assert await store.read(str(Path(location).relative_to(root.resolve()))) == "hello"
        for outside in ("../secret.txt", str(tmp_path / "secret.txt"), "/etc/passwd", "."):
            with pytest.raises(ValueError, match="not under the offload directory"):
                await store.read(outside)
        with pytest.raises(LookupError):
            await store.read("ns/missing.txt")


async def test_store_refuses_a_symlink_out_of_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "f.txt").write_text("outside")
    (root / "link").symlink_to(tmp_path / "elsewhere")
    store = FileStore(root)
    with pytest.raises(ValueError, match="not under the offload directory"):
        store.path_for(("link", "f"))
    with pytest.raises(ValueError, match="not under the offload directory"):
        async with asyncio.timeout(SHORT_TIMEOUT):
            await store.read("link/f.txt")


# --- truncation -----------------------------------------------------------------------------


async def test_a_long_result_is_offloaded_and_the_context_holds_the_preview(
    kind: MessageKind, attach: Attach, tmp_path: Path
) -> None:
    mw = ReductionMiddleware(tmp_path, max_length=100, preview_chars=20)
    turns = [ScriptedTurn(tool_calls=[("pieces", {"count": 5, "size": 40})]), "done"]
    agent = _agent(kind, turns, [await attach(mw)])
    events = await collect(agent.reply("go"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    full = _letters(5, 40)
    [result] = _results(agent)
    assert result.text.startswith(full[:20] + "\n\n")
    assert "showing the first 20 of 200 characters" in result.text
    assert "read_tool_output tool" in result.text
    location = _location(result.text)
    assert location in _files(tmp_path)
    assert location.read_text() == full
    # The consumer sees what the context holds: one preview delta instead of five pieces.
    deltas = [e for e in events if e.type == "tool_result_delta"]
    assert [d.text for d in deltas] == [result.text]  # type: ignore[union-attr]


async def test_a_short_result_passes_unchanged(
    kind: MessageKind, attach: Attach, tmp_path: Path
) -> None:
    mw = ReductionMiddleware(tmp_path, max_length=100, preview_chars=20)
    turns = [ScriptedTurn(tool_calls=[("pieces", {"count": 2, "size": 50})]), "done"]
    agent = _agent(kind, turns, [await attach(mw)])
    events = await collect(agent.reply("go"))
    deltas = [e.text for e in events if e.type == "tool_result_delta"]  # type: ignore[union-attr]
    assert deltas == ["a" * 50, "b" * 50]
    assert [r.text for r in _results(agent)] == ["a" * 50 + "b" * 50]
    assert _entries(tmp_path) == []


async def test_excluded_tools_are_never_truncated(
    kind: MessageKind, attach: Attach, tmp_path: Path
) -> None:
    mw = ReductionMiddleware(tmp_path, max_length=100, preview_chars=20, exclude_tools=["pieces"])
    turns = [ScriptedTurn(tool_calls=[("pieces", {"count": 5, "size": 40})]), "done"]
    agent = _agent(kind, turns, [await attach(mw)])
    await collect(agent.reply("go"))
    assert [r.text for r in _results(agent)] == [_letters(5, 40)]
    assert _entries(tmp_path) == []


@pytest.mark.parametrize(
    ("size", "tail", "first", "last"),
    [
        (150, 10, "x" * 20, ""),  # the preview ends before the image
        (5, 200, "x" * 5, "y" * 15),  # it goes on after it
    ],
    ids=["preview-before-image", "preview-across-image"],
)
async def test_truncating_a_multipart_result_keeps_its_structure(
    kind: MessageKind, attach: Attach, tmp_path: Path, size: int, tail: int, first: str, last: str
) -> None:
    mw = ReductionMiddleware(tmp_path, max_length=100, preview_chars=20)
    turns = [ScriptedTurn(tool_calls=[("pictures", {"size": size, "tail": tail})]), "done"]
    agent = _agent(kind, turns, [await attach(mw)], tools=[pictures])
    await collect(agent.reply("go"))
    [result] = _results(agent)
    # [text, image, text] stays [text, image, text]: the preview takes the first 20
    # characters in order, the image keeps its place, the pointer closes the last text.
    assert [o.type for o in result.output] == ["text", "image", "text"]
    assert result.output[0].text == first
    tail_text = result.output[2].text
    assert tail_text.startswith(last + ("\n\n" if last else "") + "[hookmesh: output truncated")
    assert f"showing the first 20 of {size + 1 + tail} characters" in tail_text
    assert _location(result.text).read_text() == "x" * size + "\n" + "y" * tail


@tool(read_only=True)
async def chatter(before: int, after: int) -> AsyncIterator[Any]:
    """One letter per delta, an image, more letters.

    Args:
        before: Letters before the image.
        after: Letters after it.
    """
    for i in range(before):
        yield chr(ord("a") + i % 26)
    yield ImageBlock(source=InlineSource(data=b"\x89PNG", mime_type="image/png"))
    for i in range(after):
        yield chr(ord("A") + i % 26)


async def test_a_result_streamed_in_many_small_deltas_is_joined_per_run(
    kind: MessageKind, attach: Attach, tmp_path: Path
) -> None:
    mw = ReductionMiddleware(tmp_path, max_length=100, preview_chars=30)
    turns = [ScriptedTurn(tool_calls=[("chatter", {"before": 20, "after": 500})]), "done"]
    agent = _agent(kind, turns, [await attach(mw)], tools=[chatter])
    await collect(agent.reply("go"))
    [result] = _results(agent)
    before = _letters(20, 1)
    after = "".join(chr(ord("A") + i % 26) for i in range(500))
    assert [o.type for o in result.output] == ["text", "image", "text"]
    assert result.output[0].text == before
    assert result.output[2].text.startswith(after[:10] + "\n\n[hookmesh: output truncated")
    assert "showing the first 30 of 521 characters" in result.output[2].text
    assert _location(result.text).read_text() == before + "\n" + after


async def test_the_model_reads_offloaded_output_back_page_by_page(
    kind: MessageKind, attach: Attach, tmp_path: Path
) -> None:
    mw = ReductionMiddleware(tmp_path, max_length=100, preview_chars=20)
    seen: list[str] = []

    def script(messages: Sequence[Message], tools: Any, tool_choice: Any) -> ScriptedTurn:
        results = [r for m in messages for r in tool_results(m)]
        if not results:
            return ScriptedTurn(tool_calls=[("pieces", {"count": 5, "size": 40})])
        if len(results) == 1:
            path = str(_location(results[0].text))
            return ScriptedTurn(
                tool_calls=[("read_tool_output", {"path": path, "offset": 30, "limit": 20})]
            )
        seen.append(results[-1].text)
        return ScriptedTurn(text="done")

    agent = Agent(
        ScriptedChatModel(script), kind=kind, tools=[pieces], middlewares=[await attach(mw)]
    )
    events = await collect(agent.reply("go"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    full = _letters(5, 40)
    assert seen == [full[30:50] + "\n[characters 30-50 of 200; continue with offset=50]"]


async def test_the_read_tool_refuses_paths_outside_the_store(tmp_path: Path) -> None:
    mw = ReductionMiddleware(tmp_path / "root")
    [read] = mw.list_tools()
    (tmp_path / "secret.txt").write_text("secret")
    with pytest.raises(ValueError, match="no saved tool output"):
        async with asyncio.timeout(SHORT_TIMEOUT):
            async for _ in read.run({"path": str(tmp_path / "secret.txt")}):
                pass


class _IdModel(ChatModel):
    """Calls `pieces` once with a hostile call id, then answers."""

    def __init__(self, call_id: str) -> None:
        self.call_id = call_id

    async def __call__(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[dict[str, Any]] = (),
        tool_choice: str = "auto",
        kind: MessageKind = "flat",
    ) -> ModelResponse:
        if any(tool_results(m) for m in messages):
            return ModelResponse(make_assistant(kind, "done"))
        call = ToolCall(id=self.call_id, name="pieces", arguments='{"count": 3, "size": 50}')
        return ModelResponse(make_assistant(kind, "", [call]))


@pytest.mark.parametrize("call_id", HOSTILE_IDS)
async def test_hostile_call_ids_cannot_escape_the_root(
    kind: MessageKind, tmp_path: Path, call_id: str
) -> None:
    root = tmp_path / "root"
    mw = ReductionMiddleware(root, max_length=100, preview_chars=10)
    agent = Agent(_IdModel(call_id), kind=kind, tools=[pieces], middlewares=[mw])
    events = await collect(agent.reply("go"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert _entries(tmp_path) == [root]
    files = _files(root)
    assert len(files) == 1
    assert files[0].read_text() == _letters(3, 50)
    assert _NAME.match(files[0].stem) and len(files[0].name) <= 100
    assert _location(_results(agent)[0].text) == files[0]


class _Memory(OffloadStore):
    """Another backend: a dict (or a broken one)."""

    def __init__(self, broken: bool = False) -> None:
        self.broken = broken
        self.texts: dict[str, str] = {}

    async def write(self, key: Sequence[str], text: str) -> str:
        if self.broken:
            raise OSError("disk full")
        location = "mem://" + "/".join(safe_name(k) for k in key)
        self.texts[location] = text
        return location

    async def read(self, location: str) -> str:
        return self.texts[location]


@pytest.mark.parametrize("broken", [False, True])
async def test_another_store_backend_and_a_failing_store(kind: MessageKind, broken: bool) -> None:
    store = _Memory(broken)
    mw = ReductionMiddleware(store=store, max_length=100, preview_chars=20)
    turns = [ScriptedTurn(tool_calls=[("pieces", {"count": 5, "size": 40})]), "done"]
    agent = _agent(kind, turns, [mw])
    events = await collect(agent.reply("go"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    [result] = _results(agent)
    assert result.text.startswith("a" * 20)
    if broken:
        assert "The full text could not be saved." in result.text
        assert store.texts == {}
    else:
        assert list(store.texts.values()) == [_letters(5, 40)]
        assert _LOCATION.findall(result.text)[0].startswith("mem://truncated/")


# --- clearing -------------------------------------------------------------------------------


def _history(kind: MessageKind, steps: int, size: int = 400) -> list[Message]:
    """A user turn, then `steps` assistant steps of two calls (search, then note) each.

    Agentic: both results and a user remark share ONE user message (mixed); flat: one tool
    message per result plus a user message.
    """
    msgs = [make_user_text(kind, "start", id="u0")]
    for i in range(steps):
        calls = [
            ToolCall(id=f"s{i}", name="search", arguments='{"query": "' + "q" * 100 + '"}'),
            ToolCall(id=f"n{i}", name="note", arguments='{"text": "' + "t" * 100 + '"}'),
        ]
        msgs.append(make_assistant(kind, "", calls, id=f"a{i}"))
        texts = [str(i % 10) * size, chr(ord("k") + i % 10) * size]
        if kind == "agentic":
            blocks: list[Any] = [
                ToolResultBlock(call_id=c.id, name=c.name, output=[TextBlock(text=t)])
                for c, t in zip(calls, texts, strict=True)
            ]
            blocks.append(TextBlock(text=f"remark {i}"))
            msgs.append(AgenticMessage(id=f"r{i}", role="user", blocks=blocks))
        else:
            for c, t in zip(calls, texts, strict=True):
                msgs.append(make_tool_result(kind, c.id, c.name, t, id=f"r{i}-{c.id}"))
            msgs.append(make_user_text(kind, f"remark {i}", id=f"m{i}"))
    return msgs


def _by_call(agent: Agent) -> dict[str, str]:
    return {r.call_id: r.text for r in _results(agent)}


async def test_old_results_are_cleared_and_recent_ones_kept(
    kind: MessageKind, attach: Attach, tmp_path: Path
) -> None:
    mw = ReductionMiddleware(tmp_path, max_tokens_for_clear=500, keep_recent=1)
    agent = _agent(kind, ["done"], [await attach(mw)])
    agent.state.context.extend(_history(kind, 3))
    before = _by_call(agent)
    ids = [m.id for m in agent.state.context]
    events = await collect(agent.reply("go"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    # Same messages (ids, order), the reply's two appended.
    assert [m.id for m in agent.state.context][: len(ids)] == ids
    after = _by_call(agent)
    cleared = ["s0", "n0", "s1", "n1", "s2"]
    for call_id in cleared:
        assert after[call_id].startswith("[Old tool result cleared to save context.")
        assert _location(after[call_id]).read_text() == before[call_id]
    assert after["n2"] == before["n2"]
    # Metadata marks the cleared call ids per message; user text next to results survives.
    marks = [
        (m.metadata or {}).get(CLEARED_METADATA_KEY) for m in agent.state.context if m.metadata
    ]
    assert sorted(c for mark in marks for c in mark) == sorted(cleared)
    remarks = [text_of(m) for m in agent.state.context if text_of(m).startswith("remark")]
    assert remarks == ["remark 0", "remark 1", "remark 2"]
    # Arguments are kept by default.
    assert all(c.arguments != CLEARED_ARGUMENTS for m in agent.state.context for c in tool_calls(m))
    [event] = [e for e in customs(events) if e.name == CLEARED_EVENT]
    assert event.value["results"] == 5
    assert event.value["tokens_after"] < event.value["tokens_before"]


async def test_cleared_results_are_never_processed_again(
    kind: MessageKind, attach: Attach, tmp_path: Path
) -> None:
    mw = ReductionMiddleware(tmp_path, max_tokens_for_clear=200, keep_recent=0)
    agent = _agent(kind, ["one", "two"], [await attach(mw)])
    agent.state.context.extend(_history(kind, 2))
    first = await collect(agent.reply("go"))
    snapshot = [m.model_dump() for m in agent.state.context]
    files = _files(tmp_path)
    second = await collect(agent.reply("again"))
    assert [e.name for e in customs(first)] == [CLEARED_EVENT]
    assert customs(second) == []
    assert [m.model_dump() for m in agent.state.context][: len(snapshot)] == snapshot
    assert _files(tmp_path) == files


async def test_nothing_is_cleared_under_the_threshold_or_for_excluded_tools(
    kind: MessageKind, attach: Attach, tmp_path: Path
) -> None:
    mw = ReductionMiddleware(
        tmp_path, max_tokens_for_clear=500, keep_recent=0, exclude_tools=["search"]
    )
    agent = _agent(kind, ["done"], [await attach(mw)])
    agent.state.context.extend(_history(kind, 2))
    before = _by_call(agent)
    await collect(agent.reply("go"))
    after = _by_call(agent)
    assert after["s0"] == before["s0"] and after["s1"] == before["s1"]
    assert after["n0"] != before["n0"] and after["n1"] != before["n1"]
    quiet = ReductionMiddleware(tmp_path / "quiet", max_tokens_for_clear=10**9)
    calm = _agent(kind, ["done"], [await attach(quiet)])
    calm.state.context.extend(_history(kind, 2))
    events = await collect(calm.reply("go"))
    assert _by_call(calm) == before and customs(events) == []


async def test_clear_arguments_clears_the_calls_of_cleared_results(
    kind: MessageKind, attach: Attach, tmp_path: Path
) -> None:
    mw = ReductionMiddleware(
        tmp_path, max_tokens_for_clear=500, keep_recent=2, clear_arguments=True
    )
    agent = _agent(kind, ["done"], [await attach(mw)])
    agent.state.context.extend(_history(kind, 2))
    await collect(agent.reply("go"))
    arguments = {c.id: c.arguments for m in agent.state.context for c in tool_calls(m)}
    assert arguments["s0"] == arguments["n0"] == CLEARED_ARGUMENTS
    assert arguments["s1"].startswith('{"query"') and arguments["n1"].startswith('{"text"')
    assistant = next(m for m in agent.state.context if m.id == "a0")
    assert (assistant.metadata or {})[CLEARED_METADATA_KEY] == ["s0", "n0"]


async def test_a_truncated_result_is_cleared_pointing_at_its_first_file(
    kind: MessageKind, tmp_path: Path
) -> None:
    mw = ReductionMiddleware(tmp_path, max_length=100, preview_chars=20, keep_recent=1)
    turns = [
        ScriptedTurn(tool_calls=[("pieces", {"count": 5, "size": 40})]),
        ScriptedTurn(tool_calls=[("pieces", {"count": 1, "size": 10})]),
        "done",
    ]
    agent = _agent(kind, turns, [mw])
    mw.max_tokens_for_clear = 1  # clear from the second step on
    await collect(agent.reply("go"))
    first, second = _results(agent)
    assert first.text.startswith("[Old tool result cleared")
    assert _location(first.text).read_text() == _letters(5, 40)
    assert second.text == "a" * 10
    assert not (tmp_path / "cleared").exists()


async def test_state_counts_cleared_results_per_reply(kind: MessageKind, tmp_path: Path) -> None:
    mw = ReductionMiddleware(tmp_path, max_tokens_for_clear=100, keep_recent=0)
    seen: list[dict[str, Any]] = []

    def script(messages: Sequence[Message], tools: Any, tool_choice: Any) -> ScriptedTurn:
        seen.append(dict(mw.state(agent)))
        return ScriptedTurn(text="done")

    agent = Agent(ScriptedChatModel(script), kind=kind, middlewares=[mw])
    agent.state.context.extend(_history(kind, 1))
    await collect(agent.reply("go"))
    assert seen == [{"cleared": 2}]
    assert agent.state.middle_context == {"reduction": {}}


async def test_a_users_output_is_offloaded_in_their_folder_and_read_by_them_only(
    kind: MessageKind, tmp_path: Path
) -> None:
    from hookmesh.middleware import user_folder
    from hookmesh.tools import ToolContext

    mw = ReductionMiddleware(tmp_path, max_length=100, preview_chars=20)
    script: list[ScriptedTurn | str] = [
        ScriptedTurn(tool_calls=[("pieces", {"count": 5, "size": 40})]),
        "done",
    ]
    agent = Agent(
        ScriptedChatModel(script), kind=kind, tools=[pieces], middlewares=[mw], user_id="alice"
    )
    await collect(agent.reply("go"))
    [saved] = await asyncio.to_thread(lambda: list(tmp_path.rglob("*.txt")))
    assert saved.relative_to(tmp_path).parts[0] == user_folder("alice")
    [read] = mw.list_tools()
    bob = Agent(ScriptedChatModel(["x"]), kind=kind, user_id="bob")
    with pytest.raises(ValueError, match="another user"):
        async for _ in read.run({"path": str(saved)}, ToolContext(bob, ToolCall(id="c", name="r"))):
            pass
    [exported] = [r async for _, r in mw.export_user("alice")]
    assert exported == {"location": str(saved), "text": _letters(5, 40)}
    assert [r async for r in mw.export_user("bob")] == []
    assert await mw.forget_user("alice") == [("offload.files", 1)]
    assert not saved.exists() and await mw.forget_user("alice") == [("offload.files", 0)]
