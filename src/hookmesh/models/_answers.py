"""Asking a chat model for a plain answer, and reading a JSON answer out of it."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from hookmesh.models._base import ChatModel, ModelResponse
from hookmesh.schema import Message, MessageKind, text_of

_M = TypeVar("_M", bound=BaseModel)
# Models often wrap JSON in a Markdown code fence, with or without a language tag.
_FENCE = re.compile(r"^\s*```(?:json)?\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


async def answer_text(model: ChatModel, messages: Sequence[Message], kind: MessageKind) -> str:
    """The text of `model`'s answer to `messages`, offered no tools, streamed or not."""
    result = await model(messages, tools=[], tool_choice="none", kind=kind)
    if isinstance(result, ModelResponse):
        return text_of(result.message)
    return "".join([chunk.text async for chunk in result])


def json_text(answer: str) -> str:
    """The JSON in `answer`: its text without a surrounding Markdown code fence, stripped."""
    fenced = _FENCE.match(answer)
    return (fenced.group(1) if fenced else answer).strip()


def json_answer(answer: str, schema: type[_M]) -> _M | None:
    """`answer` parsed as JSON into `schema` (a surrounding code fence is tolerated), or
    None when it does not validate."""
    try:
        return schema.model_validate_json(json_text(answer))
    except ValidationError:
        return None
