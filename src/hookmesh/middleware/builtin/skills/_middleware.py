"""Skills: folders of instructions listed in the system prompt and loaded on demand, inline or
run by a forked sub-agent."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

from hookmesh.middleware import AgentView, ModelCallArgs, ModelCallNext
from hookmesh.middleware._base import FailureMode, Middleware
from hookmesh.middleware._description import MiddlewareDescription
from hookmesh.middleware.builtin._support import _checks as check
from hookmesh.middleware.builtin._support._confine import ConfinedRoot
from hookmesh.middleware.builtin._support._external import (
    EXTERNAL_PREFIX,
    answered,
    external_parameters,
    pause_calls,
    resume_call,
    resuming,
)
from hookmesh.middleware.builtin._support._nested import (
    CONFIRM_PREFIX,
    ForkOutcome,
    approved,
    asks_of,
    can_pause,
    confirm_parameters,
    pause_step,
    waits_text,
)
from hookmesh.middleware.builtin.skills._catalog import (
    SKILL_FILE,
    Skill,
    SkillContext,
    SkillError,
    find_skill,
    read_skill_file,
    scan,
    skill_files,
)
from hookmesh.middleware.builtin.skills._fork import Fork, run_fork
from hookmesh.models import ChatModel, ModelResult
from hookmesh.schema import Resume
from hookmesh.tools import Tool, ToolContext, ToolError, ToolPiece, external_tool, tool

log = logging.getLogger("hookmesh.middleware.skills")

DEFAULT_INTRO = (
    "Skills are instructions for particular kinds of task, loaded when needed. When a task "
    "matches a skill below, call the {tool} tool with the skill's name before you start. "
    "It returns the skill's instructions (follow them), or, for a skill marked sub-agent, "
    "gives your task (in `task`) to a separate agent and returns its answer. A skill may "
    "list further files: load one with the same tool and `file`."
)
"""The system-prompt text above the list of skills (``{tool}`` is the tool's name)."""


_KEPT_LISTINGS = 64
"""Replies whose skill listing is kept (replies running at once on one agent service)."""


class SkillsMiddleware(Middleware):
    """Skills with progressive disclosure: the system prompt lists each skill's name and
    description, and a tool loads the rest when the model asks.

    A skill is a folder under `root` named like the skill, holding ``SKILL.md`` with YAML
    front matter ``name`` (equal to the folder's name), ``description``, and optionally
    ``context`` (``inline``, the default; ``fork``; ``fork_with_context``), ``model`` (a
    key of `models`) and ``tools`` (names from `tools`). Folders that are not valid skills
    are left out of the list and logged.

    The tool (``skill(name, task="", file="")``):

    - ``file`` set: returns that file of the skill's folder (never one outside it:
      ``..``, absolute paths and symlinks that leave the folder are refused);
    - an ``inline`` skill: returns its instructions and the list of its other files;
    - a ``fork`` skill: runs a sub-agent (a new `Agent` with the instructions as its system
      prompt, the skill's tools from `tools`, `max_iters` steps, the model from `models`,
      `model` or, in process, the agent's own) on ``task``, and returns its final answer;
      ``fork_with_context`` also gives it a copy of the conversation so far (both message
      kinds; hint messages and the calling step are left out). Its events reach the client
      as nested events (``source_path``: this call, the skill, the sub-agent's reply) and
      count toward the reply's usage.

    Nested approvals: a sub-agent's call that needs the user's confirmation pauses it (its
    ``require_user_confirm`` streams nested) and its state is kept in this reply's
    middleware state; the call's result says it waits, and the next model call is replaced
    by a call of ``confirm_<tool_name>`` (hidden from the model; ``{"skill", "path",
    "asks"}``), which needs confirmation, so the reply pauses. Confirming it continues the
    sub-agent with its calls approved (the skill is read again), and its answer is that
    call's result; rejecting it drops the sub-agent's run. In a sidecar (no toolkit to pause
    with) such a call is denied in the sub-agent instead.

    A sub-agent's call of an external tool (one of `tools` made with ``external_tool``)
    pauses the reply the same way, on calls of the external ``external_<tool_name>``
    (hidden from the model; one per call of the sub-agent's, ``{"skill", "path", "tool",
    "arguments"}``): the caller resumes with their results, the next model call is replaced
    by a call of the skill tool that resumes the sub-agent with them as its calls' results,
    and its answer is that call's result. In a sidecar it is an error result.

    Hooks: `on_system_prompt` (the list, rescanned each reply), `on_model_call` (the pause;
    otherwise it hides the confirmation tool; in process only: a sidecar serves neither
    it nor ``confirm_skill``, see `describe`). The tool's run does the rest (loads, files
    and forks; it takes the run context for the agent's kind, model and conversation),
    through ``CallTool`` in a sidecar, so other tool calls never reach this middleware.
    State: the paused sub-agents, in the reply's middleware state. In a sidecar there is no
    agent model: pass `model`. Nested events from a sidecar stream back as they happen.

    Example:
        >>> import tempfile
        >>> mw = SkillsMiddleware(tempfile.mkdtemp())
        >>> [t.name for t in mw.list_tools()]
        ['skill', 'confirm_skill', 'external_skill']

    Args:
        root: The folder holding one sub-folder per skill.
        model: The model of forked sub-agents; None: the agent's own (in process only).
        models: Models a skill may name in its ``model`` front matter.
        tools: Tools a forked skill may name in its ``tools`` front matter.
        max_iters: Reasoning steps of a sub-agent.
        fork_token_budget: A token budget per sub-agent run (a `BudgetMiddleware` in it);
            None: no budget beyond `max_iters`.
        context_forks: Allow ``fork_with_context``; it makes every tool call carry the
            conversation to a sidecar serving this middleware.
        tool_name: The tool's name.
        intro: System-prompt text above the list; ``{tool}`` is replaced by `tool_name`.
        max_skills: Most skills listed.
        max_chars: Characters of a skill's instructions or file returned.
        failure_mode: ``fail_closed`` (default) or ``fail_open``.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        model: ChatModel | None = None,
        models: Mapping[str, ChatModel] | None = None,
        tools: Iterable[Tool] = (),
        max_iters: int = 10,
        fork_token_budget: int | None = None,
        context_forks: bool = True,
        tool_name: str = "skill",
        intro: str = DEFAULT_INTRO,
        max_skills: int = 100,
        max_chars: int = 50_000,
        failure_mode: FailureMode = "fail_closed",
    ) -> None:
        self.skills_root = ConfinedRoot(root, "the skills folder")
        self.model = model
        self.models = dict(models or {})
        for key, value in (("model", model), *self.models.items()):
            if value is not None and not isinstance(value, ChatModel):
                raise ValueError(f"{key} must be a ChatModel, not {type(value).__name__}")
        self.tools = {t.name: t for t in tools}
        self.max_iters = check.whole("max_iters", max_iters)
        self.fork_token_budget = check.optional_whole("fork_token_budget", fork_token_budget)
        self.context_forks = check.flag("context_forks", context_forks)
        self.needs_context = context_forks
        self.max_skills = check.whole("max_skills", max_skills)
        self.max_chars = check.whole("max_chars", max_chars, 100)
        self.failure_mode = check.failure(failure_mode)
        self.tool_name = tool_name
        self.intro = intro.replace("{tool}", tool_name)
        self._tool = self._build_tool()
        self._confirm = self._build_confirm()
        self._external = external_tool(
            f"{EXTERNAL_PREFIX}{tool_name}",
            "The results of the external calls a skill's sub-agent makes.",
            external_parameters("skill"),
        )
        self._hidden = frozenset((self._confirm.name, self._external.name))
        self._warned: set[str] = set()
        self._sections: dict[str, str] = {}
        """The listing of each recent reply (by reply id), oldest first."""

    def middleware_key(self) -> str:
        return "skills"

    def list_tools(self) -> list[Tool]:
        return [self._tool, self._confirm, self._external]

    def describe(self) -> MiddlewareDescription:
        """What a sidecar serving it offers: not the pause hook nor its hidden tool. A
        sidecar cannot pause (a sub-agent's ask is denied there), and the hook would cost
        a round trip before every model call for nothing."""
        full = super().describe()
        hooks = {hook: spec for hook, spec in full.hooks.items() if hook != "on_model_call"}
        return dataclasses.replace(full, hooks=hooks, tools=(self._tool.name,))

    async def on_model_call(
        self, agent: AgentView, kwargs: ModelCallArgs, next_handler: ModelCallNext
    ) -> ModelResult:
        """While forks wait for the user (or the caller), replace the model call by calls
        of the hidden confirmation (external) tool, so this reply pauses; once the caller
        gave a fork's results, by a call of the skill tool that resumes it with them;
        otherwise call the model without the hidden tools."""
        state = self.state(agent)
        waiting = state.pop("waiting", [])
        if waiting:
            return pause_step(agent, pause_calls(state, waiting, "skill", self.tool_name))
        given = answered(state, kwargs["messages"])
        if given:
            calls = [
                resume_call(
                    state, self.tool_name, {"name": e["skill"], "task": e["task"]}, e, resume
                )
                for e, resume in given
            ]
            return pause_step(agent, calls)
        return await next_handler(
            tools=[t for t in kwargs["tools"] if t["name"] not in self._hidden]
        )

    # --- system prompt ---------------------------------------------------------------------

    async def on_system_prompt(self, agent: AgentView, prompt: str) -> str:
        """List every skill's name and description (the folder is read once per reply: the
        prompt is built before every step, the listing is kept for the reply's later ones)."""
        section = self._sections.get(agent.reply_id)
        if section is None:
            section = await self._listing()
            self._sections[agent.reply_id] = section
            if len(self._sections) > _KEPT_LISTINGS:
                del self._sections[next(iter(self._sections))]
        if not section:
            return prompt
        return f"{prompt}\n\n{section}" if prompt else section

    async def _listing(self) -> str:
        """The prompt section listing the skills ("" when there are none)."""
        skills, warnings = await asyncio.to_thread(
            scan, self.skills_root, self.max_skills, self.max_chars
        )
        for warning in warnings:
            if warning not in self._warned:  # once per process, not at every reply
                self._warned.add(warning)
                log.warning("skill left out: %s", warning)
        if not skills:
            return ""
        lines = [
            f"- {s.name}{' (sub-agent)' if s.context != 'inline' else ''}: {s.description}"
            for s in skills
        ]
        return "## Skills\n" + self.intro + "\n\n" + "\n".join(lines)

    # --- the tool --------------------------------------------------------------------------

    def _text(self, skill: Skill, body: str, file: str) -> str:
        """What the tool returns without a sub-agent: the file, or the instructions and the
        list of the skill's other files (blocking)."""
        if file:
            return read_skill_file(skill, file, self.max_chars)
        files = skill_files(skill)
        listing = (
            f"\n\nFiles of this skill (load one with {self.tool_name}(name={skill.name!r}, "
            f"file=...)): {', '.join(files)}"
            if files
            else ""
        )
        return f'<skill name="{skill.name}">\n{body}\n</skill>{listing}'

    def _build_tool(self) -> Tool:
        async def skill(
            context: ToolContext[AgentView], name: str, task: str = "", file: str = ""
        ) -> AsyncIterator[ToolPiece]:
            """Load a skill listed in the system prompt: its instructions, or one of its
            files; a sub-agent skill does `task` and returns the answer.

            Args:
                name: The skill's name, as listed.
                task: For a sub-agent skill: the task, with everything it needs to know.
                file: A file of the skill to read instead, as the skill lists it.
            """
            given = resuming(self.state(context.agent), context.call.id)
            if given is not None:  # stands in for a model call: the fork's results came
                entry, resume = given
                found, body = await asyncio.to_thread(
                    find_skill, self.skills_root, entry["skill"], self.max_chars
                )
                resumed = (entry["state"], resume)
                async for piece in self._fork(context, found, body, entry["task"], resumed):
                    yield piece
                return
            found, body = await asyncio.to_thread(
                find_skill, self.skills_root, name, self.max_chars
            )
            if file or found.context == "inline":
                yield await asyncio.to_thread(self._text, found, body, file)
                return
            async for piece in self._fork(context, found, body, task):
                yield piece

        return tool(skill, name=self.tool_name, read_only=True)

    def _build_confirm(self) -> Tool:
        async def confirm(
            context: ToolContext[AgentView], **unused: Any
        ) -> AsyncIterator[ToolPiece]:
            """Continue a skill's sub-agent with the calls the user confirmed."""
            entry = self.state(context.agent).get("confirming", {}).pop(context.call.id, None)
            if entry is None:
                raise ToolError("Error: no sub-agent waits for this confirmation")
            found, body = await asyncio.to_thread(
                find_skill, self.skills_root, entry["skill"], self.max_chars
            )
            resumed = (entry["state"], approved(entry["asks"]))
            async for piece in self._fork(context, found, body, entry["task"], resumed):
                yield piece

        return Tool(
            name=f"{CONFIRM_PREFIX}{self.tool_name}",
            description="The user confirms the calls a skill's sub-agent asks to make.",
            parameters=confirm_parameters("skill"),
            func=confirm,
            needs_confirmation=True,
        )

    async def _fork(
        self,
        context: ToolContext[AgentView],
        skill: Skill,
        instructions: str,
        task: str,
        resumed: tuple[dict[str, Any], Resume] | None = None,
    ) -> AsyncIterator[ToolPiece]:
        """Run the skill's sub-agent on `task` (or continue its paused run: `resumed`): its
        events nested under the call, then its final answer (an error result when it did
        not complete or could not start); a sub-agent that waits for the user is kept in
        this reply's state, for `on_model_call` to pause on."""
        agent = context.agent
        try:
            fork = self._plan(agent, skill, task)
        except SkillError as exc:
            raise ToolError(f"Error: {exc}") from None
        outcome = ForkOutcome()
        async for event in run_fork(
            agent,
            context.call,
            fork,
            instructions,
            outcome,
            pausable=can_pause(agent, self._confirm.name),
            external=can_pause(agent, self._external.name),
            resumed=resumed,
        ):
            yield event
        if outcome.paused:
            asks = asks_of(outcome.asks)
            self.state(agent).setdefault("waiting", []).append(
                {
                    "skill": skill.name,
                    "task": task,
                    "awaiting": outcome.awaiting,
                    "state": outcome.saved,
                    "asks": asks,
                }
            )
            yield waits_text(f"The skill {skill.name}'s sub-agent", asks, outcome.awaiting)
            return
        if not outcome.ok:
            raise ToolError(outcome.text)
        yield outcome.text

    def _plan(self, agent: AgentView, skill: Skill, task: str) -> Fork:
        if not task.strip():
            raise SkillError(f"skill {skill.name} runs as a sub-agent: give it the task in `task`")
        if skill.context == "fork_with_context" and not self.context_forks:
            raise SkillError(f"skill {skill.name} needs the conversation, which is not shared here")
        if skill.model is not None:
            model = self.models.get(skill.model)
            if model is None:
                raise SkillError(
                    f"skill {skill.name} asks for model {skill.model!r}, which is not configured"
                )
        else:
            model = self.model or agent.model
            if model is None:
                raise SkillError("no model for sub-agents is configured here (pass model=)")
        missing = [t for t in skill.tools if t not in self.tools]
        if missing:
            raise SkillError(f"skill {skill.name} asks for tools that are not available: {missing}")
        return Fork(
            name=skill.name,
            model=model,
            tools=[self.tools[t] for t in skill.tools],
            task=task,
            with_context=skill.context == "fork_with_context",
            max_iters=self.max_iters,
            token_budget=self.fork_token_budget,
        )


__all__ = ["DEFAULT_INTRO", "SKILL_FILE", "Skill", "SkillContext", "SkillError", "SkillsMiddleware"]
