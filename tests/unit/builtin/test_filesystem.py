"""FilesystemMiddleware: the file tools, confinement, caps, read-only mode and execute."""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from hookmesh.agent import Agent, Confirmation, Resume
from hookmesh.middleware.builtin.filesystem import FilesystemMiddleware
from hookmesh.middleware.builtin.reduction import ReductionMiddleware
from hookmesh.models import ScriptedChatModel
from hookmesh.schema import DocumentBlock, ImageBlock, MessageKind
from tests.agent_helpers import collect
from tests.builtin_helpers import calls, documented_parameters, parameters, results
from tests.conftest import Attach

pytestmark = pytest.mark.timeout(60)

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
PDF = b"%PDF-1.7\n1 0 obj <<>> endobj\n%%EOF\n"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "README.md").write_text("# Demo\nhello world\n")
    (root / "src" / "app.py").write_text("def main():\n    return 'Hello'\n")
    (root / "pic.png").write_bytes(PNG)
    (root / "paper.pdf").write_bytes(PDF)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOP SECRET hello\n")
    (root / "escape").symlink_to(outside)
    (root / "secret-link.txt").symlink_to(outside / "secret.txt")
    (root / "inner-link.txt").symlink_to(root / "README.md")
    return root.resolve()


async def _run(
    kind: MessageKind, mws: list[Any], *steps: list[tuple[str, dict[str, Any]]], **kw: Any
) -> Agent:
    agent = Agent(ScriptedChatModel(calls(*steps)), kind=kind, middlewares=mws, **kw)
    events = await collect(agent.reply("go"))
    assert events[-1].type == "reply_end" and events[-1].finish_reason == "completed"
    return agent


async def test_the_agent_reads_searches_and_edits_files(
    kind: MessageKind, attach: Attach, workspace: Path
) -> None:
    fs = await attach(FilesystemMiddleware(workspace))
    agent = await _run(
        kind,
        [fs],
        [("ls", {}), ("glob", {"pattern": "**/*.py"}), ("grep", {"pattern": "(?i)hello"})],
        [("read_file", {"path": "src/app.py"}), ("read_file", {"path": "inner-link.txt"})],
        [
            ("write_file", {"path": "notes/todo.txt", "content": "one\ntwo\n"}),
            ("edit_file", {"path": "src/app.py", "old_string": "'Hello'", "new_string": "'Hi'"}),
        ],
    )
    got = results(agent)
    listing = got["call_1"].text.splitlines()
    assert "README.md (19 bytes)" in listing and "src/" in listing
    assert "escape -> (link out of the workspace)" in listing
    assert got["call_2"].text == "src/app.py"
    assert got["call_3"].text.splitlines() == [
        "README.md:2: hello world",
        "inner-link.txt:2: hello world",
        "src/app.py:2:     return 'Hello'",
    ]  # the link out of the workspace is never searched
    assert got["call_4"].text == "     1\tdef main():\n     2\t    return 'Hello'"
    assert got["call_5"].text.endswith("2\thello world")
    assert got["call_6"].text == "Created notes/todo.txt (8 bytes)"
    assert got["call_7"].text == "Replaced 1 occurrence in src/app.py"
    assert (workspace / "notes" / "todo.txt").read_text() == "one\ntwo\n"
    assert (workspace / "src" / "app.py").read_text() == "def main():\n    return 'Hi'\n"
    assert all(r.state == "success" for r in got.values())


ESCAPES = [
    ("read_file", {"path": "../outside/secret.txt"}),
    ("read_file", {"path": "{outside}/secret.txt"}),
    ("read_file", {"path": "secret-link.txt"}),
    ("read_file", {"path": "escape/secret.txt"}),
    ("ls", {"path": "escape"}),
    ("ls", {"path": ".."}),
    ("write_file", {"path": "../outside/planted.txt", "content": "x"}),
    ("write_file", {"path": "escape/planted.txt", "content": "x"}),
    ("write_file", {"path": "{outside}/planted.txt", "content": "x"}),
    ("edit_file", {"path": "secret-link.txt", "old_string": "TOP", "new_string": "NOT"}),
    ("glob", {"pattern": "../outside/*"}),
    ("glob", {"pattern": "/etc/*"}),
    ("grep", {"pattern": "SECRET", "path": "escape"}),
]


async def test_paths_never_escape_the_workspace(
    kind: MessageKind, attach: Attach, workspace: Path
) -> None:
    outside = workspace.parent / "outside"
    steps = [
        [(name, {k: v.replace("{outside}", str(outside)) for k, v in args.items()})]
        for name, args in ESCAPES
    ]
    fs = await attach(FilesystemMiddleware(workspace))
    agent = await _run(
        kind, [fs], *steps, [("glob", {"pattern": "escape/*"}), ("grep", {"pattern": "SECRET"})]
    )
    got = results(agent)
    for i, (name, _) in enumerate(ESCAPES, start=1):
        result = got[f"call_{i}"]
        assert result.state == "error", (name, result.text)
        assert "outside the workspace" in result.text or "not a pattern inside" in result.text
        assert "TOP SECRET" not in result.text
    n = len(ESCAPES)
    assert got[f"call_{n + 1}"].text == "No paths match 'escape/*'."
    assert got[f"call_{n + 2}"].text == "No lines match 'SECRET'."
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "TOP SECRET hello\n"


async def test_edit_file_needs_a_unique_match_or_replace_all(
    kind: MessageKind, attach: Attach, workspace: Path
) -> None:
    (workspace / "dup.txt").write_text("x = 1\nx = 1\n")
    fs = await attach(FilesystemMiddleware(workspace))
    agent = await _run(
        kind,
        [fs],
        [("edit_file", {"path": "dup.txt", "old_string": "x = 1", "new_string": "x = 2"})],
        [("edit_file", {"path": "dup.txt", "old_string": "y", "new_string": "z"})],
        [
            (
                "edit_file",
                {
                    "path": "dup.txt",
                    "old_string": "x = 1",
                    "new_string": "x = 2",
                    "replace_all": True,
                },
            )
        ],
    )
    got = results(agent)
    assert got["call_1"].state == "error"
    assert "old_string appears 2 times in dup.txt" in got["call_1"].text
    assert got["call_2"].state == "error" and "was not found in dup.txt" in got["call_2"].text
    assert got["call_3"].text == "Replaced 2 occurrences in dup.txt"
    assert (workspace / "dup.txt").read_text() == "x = 2\nx = 2\n"


async def test_read_file_pages_through_lines_and_cuts_long_ones(
    kind: MessageKind, attach: Attach, workspace: Path
) -> None:
    lines = [f"line {i}" for i in range(1, 11)] + ["y" * 50]
    (workspace / "long.txt").write_text("\n".join(lines) + "\n")
    fs = await attach(FilesystemMiddleware(workspace, max_line_chars=20))
    agent = await _run(
        kind,
        [fs],
        [("read_file", {"path": "long.txt", "offset": 3, "limit": 2})],
        [("read_file", {"path": "long.txt", "offset": 11})],
        [("read_file", {"path": "long.txt", "offset": 40})],
    )
    got = results(agent)
    assert got["call_1"].text == (
        "     3\tline 3\n     4\tline 4\n[lines 3-4 shown; read on with offset=5]"
    )
    assert got["call_2"].text == "    11\t" + "y" * 20 + " … [line cut at 20 chars]"
    assert got["call_3"].text == "long.txt has fewer than 40 lines"


async def test_images_and_pdfs_come_back_as_media_blocks(
    kind: MessageKind, attach: Attach, workspace: Path
) -> None:
    fs = await attach(FilesystemMiddleware(workspace))
    plain = await attach(FilesystemMiddleware(workspace, media=False, prompt_note=None))
    agent = await _run(
        kind, [fs], [("read_file", {"path": "pic.png"}), ("read_file", {"path": "paper.pdf"})]
    )
    got = results(agent)
    image, document = got["call_1"].output[-1], got["call_2"].output[-1]
    assert isinstance(image, ImageBlock) and image.source.data == PNG  # type: ignore[union-attr]
    assert image.source.mime_type == "image/png" and image.name == "pic.png"
    assert isinstance(document, DocumentBlock) and document.source.data == PDF  # type: ignore[union-attr]
    assert got["call_1"].text == "pic.png (image/png, 24 bytes):"
    agent = await _run(kind, [plain], [("read_file", {"path": "pic.png"})])
    only = results(agent)["call_1"]
    assert [o.type for o in only.output] == ["text"]
    assert only.text == "pic.png is a image/png file (24 bytes); this agent reads files as text."


async def test_read_only_and_disabled_tools_are_not_offered(
    kind: MessageKind, attach: Attach, workspace: Path
) -> None:
    fs = await attach(FilesystemMiddleware(workspace, read_only=True, disable=["grep"]))
    assert sorted(t.name for t in fs.list_tools()) == ["glob", "ls", "read_file"]
    agent = await _run(
        kind, [fs], [("write_file", {"path": "x.txt", "content": "x"}), ("grep", {"pattern": "a"})]
    )
    got = results(agent)
    assert all(r.state == "error" and "there is no tool named" in r.text for r in got.values())
    assert not (workspace / "x.txt").exists()


async def test_outputs_are_capped(kind: MessageKind, attach: Attach, workspace: Path) -> None:
    (workspace / "many.txt").write_text("match\n" * 50)
    fs = await attach(
        FilesystemMiddleware(workspace, max_output_chars=100, max_entries=3, max_file_bytes=400)
    )
    agent = await _run(
        kind,
        [fs],
        [("read_file", {"path": "many.txt"})],
        [("grep", {"pattern": "match"})],
        [("write_file", {"path": "big.txt", "content": "x" * 401})],
    )
    got = results(agent)
    assert got["call_1"].text.startswith("     1\tmatch\n")
    assert "[output cut at 100 of " in got["call_1"].text and len(got["call_1"].text) < 250
    assert got["call_2"].text.splitlines()[-1] == "[stopped at 3 matches: narrow the search]"
    assert got["call_3"].state == "error" and "the limit is 400" in got["call_3"].text


async def test_large_outputs_go_through_the_reduction_offload(
    kind: MessageKind, attach: Attach, workspace: Path, tmp_path: Path
) -> None:
    big = "".join(f"row {i:05d}\n" for i in range(3000))
    (workspace / "big.txt").write_text(big)
    reduction = await attach(ReductionMiddleware(tmp_path / "offload", max_length=5000))
    fs = await attach(FilesystemMiddleware(workspace, max_output_chars=None))
    agent = await _run(kind, [reduction, fs], [("read_file", {"path": "big.txt", "limit": 3000})])
    preview = results(agent)["call_1"].text
    assert preview.startswith("     1\trow 00000\n") and len(preview) < 2500
    saved = re.search(r"Full output saved at:\n([^\n]+)\n", preview)
    assert saved is not None
    full = await asyncio.to_thread(Path(saved.group(1)).read_text)
    assert full.splitlines()[-1] == "  3000\trow 02999" and len(full.splitlines()) == 3000


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


async def test_execute_is_off_by_default_and_runs_argv_in_the_workspace(
    kind: MessageKind, attach: Attach, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "execute" not in [t.name for t in FilesystemMiddleware(workspace).list_tools()]
    monkeypatch.setenv("AGENT_API_KEY", "sk-not-for-commands")
    fs = await attach(
        FilesystemMiddleware(
            workspace, execute=True, execute_needs_confirmation=False, execute_max_output=200
        )
    )
    code = "import os, sys; print(os.getcwd()); print(os.environ.get('AGENT_API_KEY'))"
    agent = await _run(
        kind,
        [fs],
        [("execute", {"argv": _python(code)})],
        [("execute", {"argv": _python("print('z' * 300); raise SystemExit(3)")})],
        [("execute", {"argv": _python("import time; time.sleep(30)"), "timeout": 0.5})],
        [("execute", {"argv": ["no-such-program-here"]})],
        [("execute", {"argv": ["echo", "$HOME", "&&", "rm", "-rf", "/"]})],
    )
    got = results(agent)
    assert got["call_1"].text == f"exit code 0\n{workspace}\nNone\n"
    assert (
        got["call_2"].text == "exit code 3\n" + "z" * 200 + "\n[101 more bytes of output not shown]"
    )
    assert got["call_3"].state == "error" and "timed out after 0.5 s" in got["call_3"].text
    assert (
        got["call_4"].state == "error" and "cannot run 'no-such-program-here'" in got["call_4"].text
    )
    assert got["call_5"].text == "exit code 0\n$HOME && rm -rf /\n"  # no shell


async def test_execute_asks_the_user_first(
    kind: MessageKind, attach: Attach, workspace: Path
) -> None:
    fs = await attach(FilesystemMiddleware(workspace, execute=True))
    agent = Agent(
        ScriptedChatModel(calls([("execute", {"argv": ["echo", "ran"]})])),
        kind=kind,
        middlewares=[fs],
    )
    events = await collect(agent.reply("go"))
    assert events[-1].finish_reason == "awaiting_confirmation"  # type: ignore[union-attr]
    assert [c.name for c in events[-2].tool_calls] == ["execute"]  # type: ignore[union-attr]
    events = await collect(
        agent.resume(Resume(confirmations=[Confirmation(call_id="call_1", confirmed=True)]))
    )
    assert results(agent)["call_1"].text == "exit code 0\nran\n"


async def test_grep_options_and_bad_patterns(
    kind: MessageKind, attach: Attach, workspace: Path
) -> None:
    fs = await attach(FilesystemMiddleware(workspace))
    agent = await _run(
        kind,
        [fs],
        [("grep", {"pattern": "HELLO", "ignore_case": True, "include": "*.py"})],
        [("grep", {"pattern": "(unclosed"})],
        [("grep", {"pattern": "(a+)+$", "path": "README.md"})],
    )
    got = results(agent)
    assert got["call_1"].text == "src/app.py:2:     return 'Hello'"
    assert got["call_2"].state == "error" and "invalid regular expression" in got["call_2"].text
    assert got["call_3"].text == "No lines match '(a+)+$'."


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"disable": "grep"}, "not one string"),
        ({"disable": ["rm"]}, "unknown tools"),
        ({"max_output_chars": 0}, "max_output_chars must be an int >= 1 or None"),
        ({"max_entries": True}, "max_entries must be an int >= 1"),
        ({"execute": "yes"}, "execute must be a bool"),
        ({"execute_timeout": 0}, "execute_timeout must be a number > 0"),
        ({"prompt_note": 3}, "prompt_note must be a string or None"),
    ],
)
def test_parameters_are_validated(workspace: Path, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FilesystemMiddleware(workspace, **kwargs)
    with pytest.raises(ValueError, match="must be an existing folder"):
        FilesystemMiddleware(workspace / "missing")


def test_the_docs_page_lists_every_parameter() -> None:
    assert documented_parameters("filesystem.md") == parameters(FilesystemMiddleware)
