"""Skill folders: finding them under a root, reading their SKILL.md and their other files,
each confined to its own folder (blocking: run in a thread)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hookmesh.middleware.builtin._support._confine import ConfinedRoot, PathEscapeError
from hookmesh.middleware.builtin._support._frontmatter import split_front_matter

SkillContext = Literal["inline", "fork", "fork_with_context"]
"""How a skill runs: its text joins the conversation, or a sub-agent does the task (alone,
or with a copy of the conversation)."""
SKILL_FILE = "SKILL.md"
"""The file that makes a folder a skill."""

_NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_MAX_LISTED_FILES = 50


class SkillError(ValueError):
    """A skill is missing, malformed, or a file of it cannot be read; shown to the model."""


class _FrontMatter(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    name: str = Field(min_length=1, max_length=64)
    description: str = Field(min_length=1, max_length=1024)
    context: SkillContext = "inline"
    model: str | None = None
    tools: list[str] = Field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Skill:
    """One skill: its front matter and where its folder is."""

    name: str
    """Its name, equal to its folder's name."""
    description: str
    """When to use it, as listed in the system prompt."""
    context: SkillContext
    """How it runs."""
    model: str | None
    """The model a forked sub-agent uses (a name from the middleware's `models`)."""
    tools: tuple[str, ...]
    """Tools a forked sub-agent may call (names from the middleware's `tools`)."""
    folder: ConfinedRoot
    """Its folder: the only place its files are read from."""


def _parse(name: str, folder: ConfinedRoot, max_chars: int) -> tuple[Skill, str]:
    where = f"{name}/{SKILL_FILE}"
    path = folder.resolve(SKILL_FILE)
    if not path.is_file():
        raise SkillError(f"the skill folder {name} has no {SKILL_FILE}")
    if path.stat().st_size > max_chars * 4:
        raise SkillError(f"{where} is too large")
    data, body = split_front_matter(path.read_text(encoding="utf-8", errors="replace"))
    if data is None:
        raise SkillError(f"{where} has no YAML front matter")
    try:
        meta = _FrontMatter.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise SkillError(f"{where}: {problems}") from None
    if meta.name != name:
        raise SkillError(f"{where}: name {meta.name!r} must equal the folder's name {name!r}")
    skill = Skill(
        meta.name,
        " ".join(meta.description.split()),
        meta.context,
        meta.model,
        tuple(meta.tools),
        folder,
    )
    return skill, body.strip()[:max_chars]


def find_skill(root: ConfinedRoot, name: str, max_chars: int) -> tuple[Skill, str]:
    """The skill called `name` and its instructions (SKILL.md without front matter).

    Raises:
        SkillError: No such skill, or its SKILL.md is invalid or leaves its folder.
    """
    if not _NAME.fullmatch(name) or len(name) > 64:
        raise SkillError(f"{name!r} is not a skill name")
    try:
        folder = root.sub(name, f"the skill folder {name}")
        if not folder.root.is_dir():
            raise SkillError(f"there is no skill named {name!r}")
        return _parse(name, folder, max_chars)
    except PathEscapeError as exc:
        raise SkillError(f"skill {name!r} is not usable: {exc}") from None


def scan(root: ConfinedRoot, max_skills: int, max_chars: int) -> tuple[list[Skill], list[str]]:
    """Every valid skill under `root` (sorted by name, at most `max_skills`), and a warning
    for each folder that is not a valid skill (folder names must be skill names)."""
    skills: list[Skill] = []
    warnings: list[str] = []
    if not root.root.is_dir():
        return skills, [f"the skills folder {root.root.name} does not exist"]
    for entry in sorted(os.scandir(root.root), key=lambda e: e.name):
        if entry.name.startswith(".") or not entry.is_dir():
            continue
        if len(skills) == max_skills:
            warnings.append(f"more than {max_skills} skills: the rest are not listed")
            break
        try:
            skills.append(find_skill(root, entry.name, max_chars)[0])
        except (SkillError, OSError) as exc:
            warnings.append(str(exc))
    return skills, warnings


def read_skill_file(skill: Skill, file: str, max_chars: int) -> str:
    """A file of the skill's folder, as text (cut at `max_chars`).

    Raises:
        SkillError: It is outside the folder, missing, a folder, or binary.
    """
    try:
        path = skill.folder.resolve(file, allow_root=False)
    except PathEscapeError as exc:
        raise SkillError(str(exc)) from None
    if not path.is_file():
        raise SkillError(f"skill {skill.name} has no file {file!r}")
    with path.open("rb") as f:
        raw = f.read(max_chars * 4)
    if b"\0" in raw[:8192]:
        raise SkillError(f"{file} is a binary file")
    text = raw.decode("utf-8", errors="replace")
    return text if len(text) <= max_chars else text[:max_chars] + "\n[file cut]"


def skill_files(skill: Skill) -> list[str]:
    """The skill's other files (relative paths, sorted, at most 50), for the model to load."""
    out: list[str] = []
    base = skill.folder.root
    for folder, dirs, files in os.walk(base):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            path = Path(folder) / name
            if name.startswith(".") or path == base / SKILL_FILE or not skill.folder.inside(path):
                continue
            out.append(path.relative_to(base).as_posix())
            if len(out) == _MAX_LISTED_FILES:
                return out
    return out
