"""The demo model: rule based and deterministic, it shows the suite without a model server (the
default of `hookmesh up` and `hookmesh demo` offline)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from hookmesh.models._base import FINAL_TOOL, ToolChoice
from hookmesh.models._demo_intents import intent_of
from hookmesh.models._demo_output import instance_of
from hookmesh.models._scripted import ScriptedChatModel, ScriptedTurn
from hookmesh.schema import (
    HINT_METADATA_KEY,
    Message,
    ToolCall,
    ToolResult,
    is_hint,
    is_tool_result,
    is_user,
    text_of,
    tool_calls,
    tool_results,
)

HELP = (
    "I am hookmesh's demo model: offline and rule based, so I know only a few requests. Try:\n"
    "- What's the weather in Oslo? (a tool call)\n"
    "- How does a sidecar authenticate? (a cited search of the handbook knowledge base)\n"
    "- Remember that I prefer green tea. Then: What do I like to drink? (long-term memory)\n"
    "- Delete the file notes.txt (a tool that asks for your confirmation)\n"
    "- Say hello out loud (a spoken answer)\n"
    "- Put me through to the chef: what goes with mushrooms? (a handoff to another agent)\n"
    "- any of these with an output schema (a typed answer: chat --output-schema FILE)\n"
    "Set OPENAI_BASE_URL (and OPENAI_MODEL) to use a real model instead."
)
"""What the model answers to anything it does not recognise."""
_KB_HELP = "hookmesh kb create handbook, then hookmesh ingest docs --kb handbook"
_PASSAGE = re.compile(r"^\[(\d+)\] \(([^)]*)\) (.*)", re.S)
_EXCERPT_CHARS = 280


def _hints(messages: Sequence[Message]) -> list[tuple[str, str]]:
    """Every middleware hint in the prompt, as (source, text)."""
    out = []
    for msg in messages:
        if not is_hint(msg):
            continue
        if msg.kind == "flat":
            out.append((str((msg.metadata or {}).get(HINT_METADATA_KEY, "")), msg.content))
        else:
            out.extend((b.source, b.text) for b in msg.blocks if b.type == "hint")
    return out


def _memories(messages: Sequence[Message]) -> list[str]:
    """The facts the memory middleware recalled for this reply (its hint's ``- fact`` lines)."""
    return [
        line[2:].strip()
        for source, text in _hints(messages)
        if source == "memory"
        for line in text.splitlines()
        if line.startswith("- ")
    ]


def _passages(text: str) -> list[tuple[str, str]]:
    """Numbered passages (``[1] (kb/document) text``, each from the start of a line) as
    (source, text)."""
    out = []
    for paragraph in re.split(r"(?m)^(?=\[\d+\] \()", text):
        found = _PASSAGE.match(paragraph.strip())
        if found:
            out.append((found.group(2), " ".join(found.group(3).split())))
    return out


def _excerpt(text: str) -> str:
    """The passage's first sentences, up to about `_EXCERPT_CHARS`."""
    if len(text) <= _EXCERPT_CHARS:
        return text
    cut = text.rfind(". ", 0, _EXCERPT_CHARS)
    return text[: cut + 1] if cut > 0 else text[: _EXCERPT_CHARS - 1] + "…"


def _cited(passages: list[tuple[str, str]]) -> str:
    """The first passage with its citation, then every source by number."""
    sources = ", ".join(f"[{n}] {source}" for n, (source, _) in enumerate(passages, 1))
    return f"{_excerpt(passages[0][1])} [1]\n\nSources: {sources}"


def _trailing_results(messages: Sequence[Message]) -> list[ToolResult]:
    """The results answering the model's last calls (hints re-added after them skipped)."""
    out: list[ToolResult] = []
    for msg in reversed(messages):
        if is_hint(msg):
            continue
        if not is_tool_result(msg):
            break
        out[:0] = tool_results(msg)
    return out


def _answer(result: ToolResult, call: ToolCall | None, messages: Sequence[Message]) -> str:
    """What the model says about one tool's result."""
    args: dict[str, Any] = {}
    if call is not None:
        try:
            args = json.loads(call.arguments or "{}")
        except ValueError:
            args = {}
    text, ok = result.text.strip(), result.state == "success"
    if result.name == "get_weather" and ok:
        answer = f"It is {text} in {args.get('city', 'that city')}."
        notes = [p for _, hint in _hints(messages) for p in _passages(hint)]
        return f"{answer} From the notes: {_cited(notes)}" if notes else answer
    if result.name == "search_knowledge":
        passages = _passages(text) if ok else []
        if passages:
            return _cited(passages)
        if ok:
            return f"The knowledge base has nothing on that yet: {_KB_HELP}."
        return f"The search failed ({text}). Fill the knowledge base first: {_KB_HELP}."
    if result.name == "add_memory" and ok:
        return f"I will remember that: {args.get('text', '')}"
    if result.name == "search_memory" and ok:
        facts = [re.sub(r"^\d+\.\s*|\s*\(remembered [^)]*\)$", "", f) for f in text.splitlines()]
        if facts and text != "No memories match.":
            return f"You told me: {'; '.join(facts)}"
        return "I do not know that yet: tell me with 'Remember that …'."
    if result.name == "delete_file":
        path = args.get("path", "the file")
        return f"Done: {text}." if ok else f"I left {path} alone: {text}."
    return f"{result.name} ({result.state}): {text}"


def _spoken(text: str) -> str:
    """The words to say: the request without "say"/"speak" and "out loud"."""
    words = re.sub(r"\b(?:please|say|speak|read|out loud|aloud)\b", " ", text, flags=re.I)
    words = " ".join(words.strip(" ?!.,:").split()) or "hello from hookmesh"
    return words[:1].upper() + words[1:] + "."


def demo_turn(
    messages: Sequence[Message], tools: Sequence[dict[str, Any]], tool_choice: ToolChoice
) -> ScriptedTurn:
    """The demo model's answer: tool results put into words, else the intent of the user's
    latest words (a tool call, or a text answer), else what it can show (`HELP`). Asked for
    a structured answer (the final-answer tool offered), a text answer is given instead as
    that tool's arguments: the smallest value its schema accepts, holding the text."""
    turn = _turn(messages, tools, tool_choice)
    final = next((t for t in tools if t["name"] == FINAL_TOOL), None)
    if final is None or turn.tool_calls:
        return turn
    return ScriptedTurn(tool_calls=[(FINAL_TOOL, instance_of(final["parameters"], turn.text))])


def _turn(
    messages: Sequence[Message], tools: Sequence[dict[str, Any]], tool_choice: ToolChoice
) -> ScriptedTurn:
    results = _trailing_results(messages)
    if results:
        calls = {c.id: c for m in messages for c in tool_calls(m)}
        return ScriptedTurn(
            text="\n\n".join(_answer(r, calls.get(r.call_id), messages) for r in results)
        )
    asked = next((text_of(m) for m in reversed(messages) if is_user(m)), "")
    memories = _memories(messages)
    intent = intent_of(asked)
    if intent is None:
        remembered = f"You told me before: {'; '.join(memories)}\n\n" if memories else ""
        return ScriptedTurn(text=remembered + HELP)
    if intent.name == "recall" and memories:
        return ScriptedTurn(text=f"You told me: {'; '.join(memories)}")
    if intent.name == "speak":
        return ScriptedTurn(text=_spoken(asked))
    arguments = intent.arguments(asked)
    if intent.name == "weather" and not arguments["city"]:
        return ScriptedTurn(text="Which city? For example: What's the weather in Lisbon?")
    if tool_choice == "none":
        return ScriptedTurn(
            text=f"I was asked to answer without tools; I would call {intent.tool}."
        )
    if intent.tool not in {t["name"] for t in tools}:
        return ScriptedTurn(
            text=f"This agent offers no {intent.tool} tool; `hookmesh up` starts one that does."
        )
    return ScriptedTurn(
        reasoning=f"The user asks for {intent.name}: call {intent.tool}.",
        tool_calls=[(intent.tool, arguments)],
    )


class DemoChatModel(ScriptedChatModel):
    """Rule based and deterministic: recognises a few requests in the user's words and
    answers each with the tool that shows a part of the suite (`demo_turn`, the intents of
    `hookmesh.models._demo_intents`), streaming like a real model. Not supported: anything
    else (it says what it can show). A structured answer comes through the final-answer
    tool, the smallest value the schema accepts (`instance_of`).

    Args:
        stream: Stream the answer in chunks of `chunk_size` characters.
        chunk_size: Characters per streamed chunk.
    """

    provider_name = "demo"

    def __init__(self, *, stream: bool = True, chunk_size: int = 8) -> None:
        super().__init__(demo_turn, stream=stream, chunk_size=chunk_size, model_name="demo")
