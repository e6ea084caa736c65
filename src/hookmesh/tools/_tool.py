"""Tools: Python functions with type hints, exposed to the model as JSON-schema functions."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import json
import re
import threading
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, get_args

import jsonschema
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from hookmesh.schema import (
    AgentEvent,
    AudioBlock,
    DocumentBlock,
    ImageBlock,
    TextBlock,
    ToolOutputBlock,
    VideoBlock,
)
from hookmesh.tools._context import ToolContext, context_parameter, is_context

_ARG_LINE = re.compile(r"^\s{2,}(\w+)(?:\s*\([^)]*\))?:\s*(.+)$")

ToolPiece = str | ToolOutputBlock | AgentEvent
"""One piece a tool's run yields: text, a media block, or an event for the reply's stream."""


class ToolInfo(Protocol):
    """A tool as a hook sees it: its name, description and flags (in process the `Tool`
    itself; in a sidecar, what the invocation carried)."""

    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def parameters(self) -> dict[str, Any]: ...
    @property
    def read_only(self) -> bool: ...
    @property
    def idempotent(self) -> bool: ...
    @property
    def concurrency_safe(self) -> bool: ...
    @property
    def return_directly(self) -> bool: ...
    @property
    def needs_confirmation(self) -> bool: ...
    @property
    def external(self) -> bool: ...


class ToolArgumentError(ValueError):
    """The model's arguments are not valid for the tool; the message is shown to the model."""


@dataclass(eq=False)
class Tool:
    """A function the model may call.

    Attributes:
        name: Name the model uses.
        description: What the tool does, for the model.
        parameters: JSON schema of the arguments object.
        func: The implementation (sync, async, or an async generator streaming output).
            None for an external tool, which the caller executes. A parameter annotated
            `ToolContext` receives the run's context (see `takes_context`).
        read_only: The tool changes nothing (informational for permission middlewares).
        idempotent: Calling it again with the same arguments has the effect of calling it
            once, so a retry middleware may repeat a failed call (read-only tools are).
        concurrency_safe: May run concurrently with other safe calls of the same step.
        return_directly: Its result ends the reply as the final answer (an assistant
            message with every block of the result: text and media, in order).
        needs_confirmation: The core permission check asks the user before each call.
        external: The caller runs it: the reply pauses with require_external_execution.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    func: Callable[..., Any] | None = None
    read_only: bool = False
    concurrency_safe: bool = False
    return_directly: bool = False
    needs_confirmation: bool = False
    external: bool = False
    idempotent: bool = False
    _model: type[BaseModel] | None = field(default=None, repr=False)
    _context_arg: str | None = field(default=None, init=False, repr=False)
    _context_optional: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.func is not None:
            self._context_arg = context_parameter(self.func, self.name)
            if self._context_arg is not None:
                param = inspect.signature(self.func).parameters[self._context_arg]
                self._context_optional = param.default is None

    @property
    def takes_context(self) -> bool:
        """Whether each run needs a `ToolContext` (its function has a parameter annotated
        with it; found once, when the tool was built)."""
        return self._context_arg is not None

    def definition(self) -> dict[str, Any]:
        """The definition sent to the model: name, description, parameters."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    def parse_arguments(self, arguments: str) -> dict[str, Any]:
        """Parse and validate the model's JSON arguments.

        Raises:
            ToolArgumentError: Not JSON, not an object, or not valid for the schema.
        """
        try:
            raw = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise ToolArgumentError(
                f"arguments are not valid JSON: {exc.msg} (character {exc.pos})"
            ) from None
        except RecursionError:
            raise ToolArgumentError(_TOO_DEEP) from None
        if _too_deep(raw):
            raise ToolArgumentError(_TOO_DEEP)
        if not isinstance(raw, dict):
            raise ToolArgumentError(f"arguments must be a JSON object, got {type(raw).__name__}")
        if self._model is None:
            problem = _schema_problem(self.parameters, raw)
            if problem:
                raise ToolArgumentError(f"invalid arguments for {self.name}: {problem}")
            return raw
        try:
            parsed = self._model.model_validate(raw)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}"
                for err in exc.errors()
            )
            raise ToolArgumentError(f"invalid arguments for {self.name}: {problems}") from None
        return {name: getattr(parsed, name) for name in type(parsed).model_fields}

    async def run(
        self, arguments: dict[str, Any], context: ToolContext[Any] | None = None
    ) -> AsyncIterator[ToolPiece]:
        """Run the tool, yielding its output pieces (text or media blocks) and the events it
        streams to the reply.

        Sync functions run in a worker thread so they never block the event loop.

        Args:
            arguments: The parsed, validated arguments.
            context: The run's context; required when `takes_context`, ignored otherwise.

        Raises:
            ToolError: The run ended as an error result with its own output.
            AbortReply: The run ends the reply instead of answering the call.
        """
        if self.func is None:
            raise RuntimeError(f"tool {self.name} is external: the caller runs it")
        func = self.func
        if self._context_arg is not None:
            if context is None and not self._context_optional:
                raise RuntimeError(f"tool {self.name} runs with a ToolContext: pass one")
            arguments = {**arguments, self._context_arg: context}
        if inspect.isasyncgenfunction(func):
            async for piece in func(**arguments):
                yield _piece(piece, self.name)
            return
        if inspect.iscoroutinefunction(func):
            result = await func(**arguments)
        else:
            result = await _in_daemon_thread(func, arguments, self.name)
        for piece in _pieces(result, self.name):
            yield piece


@functools.lru_cache(maxsize=512)
def _validator(schema_json: str) -> jsonschema.protocols.Validator | None:
    """A validator for a tool's parameter schema, built once per schema; None for a schema
    that is itself invalid (then only JSON-object arguments are required, as before)."""
    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError:
        return None
    return cls(schema)  # type: ignore[no-any-return]


def _schema_problem(schema: dict[str, Any], value: dict[str, Any]) -> str:
    """Why `value` does not satisfy `schema` ('' when it does): the first error, with its path.

    A schema-only tool (a sidecar's, an MCP server's, a client's) is checked here before any
    hook sees the call, as a Python tool is checked by its pydantic model.
    """
    if not schema:
        return ""
    validator = _validator(json.dumps(schema, sort_keys=True))
    if validator is None:
        return ""
    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    if error is None:
        return ""
    where = ".".join(str(p) for p in error.absolute_path) or "(root)"
    return f"{where}: {error.message}"


MAX_ARGUMENT_DEPTH = 64
"""Deepest nesting of objects and arrays accepted in tool arguments."""
_TOO_DEEP = f"arguments are nested more than {MAX_ARGUMENT_DEPTH} levels deep"


def _too_deep(value: Any) -> bool:
    """Whether `value` nests deeper than `MAX_ARGUMENT_DEPTH` (walked without recursion)."""
    level: list[Any] = [value] if isinstance(value, dict | list) else []
    for _ in range(MAX_ARGUMENT_DEPTH + 1):
        level = (
            [
                child
                for item in level
                for child in (item.values() if isinstance(item, dict) else item)
                if isinstance(child, dict | list)
            ]
            if level
            else []
        )
        if not level:
            return False
    return True


async def _in_daemon_thread(func: Callable[..., Any], arguments: dict[str, Any], name: str) -> Any:
    """Run a sync tool in its own daemon thread.

    NOTE(hookmesh): a worker-pool thread (`asyncio.to_thread`) would hold the process at exit
    until the tool returns, so one slow tool could keep a stopping service alive past its
    grace period; a daemon thread is abandoned instead (its late result is dropped).
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def settle(outcome: Any, failed: bool) -> None:
        if not future.done():
            future.set_exception(outcome) if failed else future.set_result(outcome)

    def work() -> None:
        try:
            outcome, failed = context.run(func, **arguments), False
        except BaseException as exc:
            outcome, failed = exc, True
        with contextlib.suppress(RuntimeError):  # the loop closed while the tool ran
            loop.call_soon_threadsafe(settle, outcome, failed)

    threading.Thread(target=work, name=f"tool {name}", daemon=True).start()
    return await future


_OUTPUT_TYPES = (TextBlock, ImageBlock, AudioBlock, VideoBlock, DocumentBlock)
_KEPT = (str, *_OUTPUT_TYPES)
_EVENT_TYPES: tuple[type[Any], ...] = get_args(get_args(AgentEvent)[0])
_REPLY_EVENTS = frozenset(
    {"custom", "hint_block", "data_block_start", "data_block_delta", "data_block_end"}
)
"""Events a tool may add to the reply itself; any other it yields must be nested (a run it
drives: ``source_path`` set), so a tool never ends, answers or pauses the reply."""


def _piece(value: Any, name: str) -> ToolPiece:
    """Text, media blocks and events stay as they are; anything else is sent to the model as
    JSON.

    Raises:
        TypeError: An event of the reply's own course (a tool result, reply_end, ...).
    """
    if isinstance(value, _KEPT):
        return value
    if isinstance(value, _EVENT_TYPES):
        event: AgentEvent = value
        if not event.source_path and event.type not in _REPLY_EVENTS:
            raise TypeError(
                f"tool {name} yielded a {event.type} event: a tool may stream nested events "
                f"and {', '.join(sorted(_REPLY_EVENTS))} events"
            )
        return event
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return json.dumps(value, default=str, ensure_ascii=False)


def _pieces(result: Any, name: str) -> Iterable[ToolPiece]:
    if result is None:
        return ()
    if isinstance(result, list) and result and all(isinstance(x, _OUTPUT_TYPES) for x in result):
        return result
    return (_piece(result, name),)


def _docstring(func: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    """The description (text before Args:) and per-argument docs of a Google docstring."""
    doc = inspect.getdoc(func) or ""
    head, _, rest = doc.partition("\nArgs:\n")
    args: dict[str, str] = {}
    for line in rest.splitlines():
        if line and not line.startswith(" "):
            break
        m = _ARG_LINE.match(line)
        if m:
            args[m.group(1)] = m.group(2).strip()
    return head.strip(), args


def tool(
    func: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    concurrency_safe: bool = False,
    return_directly: bool = False,
    needs_confirmation: bool = False,
    idempotent: bool = False,
) -> Any:
    """Make a `Tool` from a type-hinted function (usable bare or with options).

    The JSON schema comes from the parameters' type hints (via pydantic), the description
    from the docstring, and each parameter's description from its ``Args:`` entry.
    """

    def build(f: Callable[..., Any]) -> Tool:
        text, arg_docs = _docstring(f)
        hints = inspect.get_annotations(f, eval_str=True)
        fields: dict[str, Any] = {}
        for pname, param in inspect.signature(f).parameters.items():
            if is_context(hints.get(pname)):
                continue  # the run's context, not an argument of the model's
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise TypeError(f"tool {f.__name__}: *args/**kwargs cannot be described to a model")
            annotation = hints.get(pname, Any)
            default = ... if param.default is param.empty else param.default
            fields[pname] = (annotation, Field(default, description=arg_docs.get(pname)))
        model = create_model(  # type: ignore[call-overload]
            f"{f.__name__}_args", __config__=ConfigDict(extra="forbid"), **fields
        )
        schema = model.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        return Tool(
            name=name or f.__name__,
            description=description or text or f.__name__,
            parameters=schema,
            func=f,
            read_only=read_only,
            concurrency_safe=concurrency_safe,
            return_directly=return_directly,
            needs_confirmation=needs_confirmation,
            idempotent=idempotent,
            _model=model,
        )

    return build(func) if func is not None else build


def external_tool(name: str, description: str, parameters: dict[str, Any]) -> Tool:
    """A tool the caller executes: calling it pauses the reply with require_external_execution."""
    return Tool(name=name, description=description, parameters=parameters, external=True)


class Toolkit:
    """The agent's tools by name, with their definitions computed once."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._definitions: list[dict[str, Any]] | None = None
        for t in tools:
            self.add(t)

    def add(self, t: Tool) -> None:
        """Register `t`; names must be unique."""
        if t.name in self._tools:
            raise ValueError(f"two tools are named {t.name!r}")
        self._tools[t.name] = t
        self._definitions = None

    def get(self, name: str) -> Tool | None:
        """The tool called `name`, or None."""
        return self._tools.get(name)

    def __iter__(self) -> Any:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def definitions(self) -> list[dict[str, Any]]:
        """Definitions for the model, built once per change of the toolkit."""
        if self._definitions is None:
            self._definitions = [t.definition() for t in self._tools.values()]
        return self._definitions
