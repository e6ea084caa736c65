"""Skills, AGENTS.md, tool search, tasks and file tools together in one agent, on both kinds,
in process and each behind its own sidecar; the built-ins' registry; the docs' examples."""

from __future__ import annotations

from pathlib import Path

import pytest

from hookmesh.agent import Agent
from hookmesh.middleware import Middleware, builtin
from hookmesh.middleware.builtin.agents_md import AGENTS_MD_METADATA_KEY, AgentsMdMiddleware
from hookmesh.middleware.builtin.filesystem import FilesystemMiddleware
from hookmesh.middleware.builtin.skills import SkillsMiddleware
from hookmesh.middleware.builtin.tasks import HINT_HEADER, TasksMiddleware
from hookmesh.middleware.builtin.tool_search import ToolSearchMiddleware
from hookmesh.models import ScriptedChatModel, ScriptedTurn
from hookmesh.schema import MessageKind, is_hint, text_of
from tests.agent_helpers import collect
from tests.builtin_helpers import Recorded, own, python_blocks, results
from tests.conftest import Attach
from tests.unit.builtin.test_tool_search import DYNAMIC

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "skills" / "style").mkdir(parents=True)
    (root / "skills" / "style" / "SKILL.md").write_text(
        "---\nname: style\ndescription: House style.\n---\nWrite short sentences.\n"
    )
    (root / "skills" / "reader").mkdir()
    (root / "skills" / "reader" / "SKILL.md").write_text(
        "---\nname: reader\ndescription: Reads files.\ncontext: fork\ntools: [read_file]\n---\n"
        "Read the file you are given and report its first line.\n"
    )
    (root / "work").mkdir()
    (root / "work" / "notes.txt").write_text("alpha\nbeta\n")
    (root / "AGENTS.md").write_text("Always cite files.\n")
    return root


async def test_the_whole_set_works_together(
    kind: MessageKind, attach: Attach, project: Path
) -> None:
    files = FilesystemMiddleware(project / "work")
    sub = ScriptedChatModel(
        [ScriptedTurn(tool_calls=[("read_file", {"path": "notes.txt"})]), "First line: alpha."]
    )
    rec = Recorded(
        [
            ScriptedTurn(
                tool_calls=[
                    ("task_create", {"subject": "Summarise notes"}),
                    ("tool_search", {"query": "select:get_time"}),
                    ("skill", {"name": "style"}),
                ]
            ),
            ScriptedTurn(
                tool_calls=[
                    ("get_time", {"zone": "Europe/Oslo"}),
                    ("skill", {"name": "reader", "task": "Read notes.txt"}),
                    ("grep", {"pattern": "beta"}),
                ]
            ),
            ScriptedTurn(
                tool_calls=[
                    ("edit_file", {"path": "notes.txt", "old_string": "beta", "new_string": "B"}),
                    ("task_update", {"task_id": "1", "status": "completed"}),
                ]
            ),
            "Done: notes.txt starts with alpha.",
        ]
    )
    middlewares: list[Middleware] = [
        await attach(AgentsMdMiddleware(project)),
        await attach(TasksMiddleware()),
        await attach(ToolSearchMiddleware(DYNAMIC)),
        await attach(SkillsMiddleware(project / "skills", model=sub, tools=files.list_tools())),
        await attach(files),
    ]
    agent = Agent(rec.model, kind=kind, middlewares=middlewares)
    events = await collect(agent.reply("Summarise my notes."))
    assert events[-1].type == "reply_end" and events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    got = results(agent)
    assert [r.state for r in got.values()] == ["success"] * 8
    assert got["call_3"].text.startswith('<skill name="style">\nWrite short sentences.')
    assert got["call_4"].text == "12:00 in Europe/Oslo"
    assert got["call_5"].text == "First line: alpha."
    assert got["call_6"].text == "notes.txt:2: beta"
    assert (project / "work" / "notes.txt").read_text() == "alpha\nB\n"
    nested = [e for e in events if e.source_path]
    assert {e.source_path[0].call_id for e in nested} == {"call_5"}  # type: ignore[index]
    assert [e.type for e in own(events)].count("reply_end") == 1
    for prompt in rec.prompts:
        assert sum(bool((m.metadata or {}).get(AGENTS_MD_METADATA_KEY)) for m in prompt) == 1
    assert "get_time" not in rec.tools[0] and "get_time" in rec.tools[1]
    assert "## Skills" in text_of(rec.prompts[0][0]) and "workspace" in text_of(rec.prompts[0][0])
    assert text_of(rec.prompts[-1][-1]) == f"{HINT_HEADER}\n#1 [completed] Summarise notes"
    assert [text_of(m) for m in agent.state.context if is_hint(m)] == [
        f"{HINT_HEADER}\n#1 [completed] Summarise notes"
    ]


def test_every_builtin_is_registered_and_importable() -> None:
    folder = Path(builtin.__file__).parent
    rooms = [p.stem for p in folder.glob("[!_]*.py")] + [
        p.parent.name for p in folder.glob("[!_]*/__init__.py")
    ]
    classes = [getattr(builtin, name) for name in builtin.__all__]
    assert all(isinstance(c, type) and issubclass(c, Middleware) for c in classes)
    assert sorted({c.__module__.split(".")[3] for c in classes}) == sorted(rooms)
    with pytest.raises(AttributeError):
        builtin.NoSuchMiddleware  # noqa: B018


@pytest.mark.parametrize(
    "page",
    [
        "events.md",
        "multi-agent.md",
        "structured-output.md",
        "middleware/agents_md.md",
        "middleware/filesystem.md",
        "middleware/guardrails.md",
        "middleware/judge_guardrail.md",
        "middleware/length_guardrail.md",
        "middleware/mcp_tools.md",
        "middleware/pattern_guardrail.md",
        "middleware/remote_agent.md",
        "middleware/skills.md",
        "middleware/tasks.md",
        "middleware/tool_schema_guardrail.md",
        "middleware/tool_search.md",
    ],
)
def test_the_docs_examples_run(page: str) -> None:
    blocks = python_blocks(page)
    assert blocks
    for block in blocks:
        exec(compile(block, page, "exec"), {"__name__": "docs"})
