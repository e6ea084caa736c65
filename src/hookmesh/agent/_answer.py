"""The structured-answer step: after each model response of a reply that asks for a
structured answer, take the answer it holds, or ask the model again with the validator's
error, or leave its tool calls to run."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

from hookmesh.agent._output import FINAL_TOOL, OutputInvalidError, OutputProblem
from hookmesh.agent._run import ReplyOutput, ReplyRun, new_id
from hookmesh.schema import (
    AgentEvent,
    HintBlockEvent,
    Message,
    MessageKind,
    StructuredOutput,
    ToolCall,
    ToolOutputBlock,
    ToolResultState,
    make_assistant,
    make_hint,
    text_of,
)

if TYPE_CHECKING:
    from hookmesh.agent._state import AgentState

_NOT_RUN = "Not run: the final answer ended this step."
_ACCEPTED = "Final answer accepted."


class AnswerSteps:
    """The agent's structured-answer step (`Agent` mixes this in; not an extension point)."""

    name: str
    kind: MessageKind
    state: AgentState
    reply_id: str
    _write: Callable[[Message], None]
    _answer_events: Callable[
        [ToolCall, str | list[ToolOutputBlock], ToolResultState], AsyncIterator[AgentEvent]
    ]

    async def _take_answer(
        self, run: ReplyRun, output: ReplyOutput, calls: list[ToolCall]
    ) -> AsyncIterator[AgentEvent]:
        """Check the answer in the model's response, if it holds one.

        Afterwards `output.result` is set (the answer validated: `run.final` is the final
        message), or `output.again` (the model is asked again: a hint or the final-answer
        call's error result says why), or neither (the response's tool calls are to run).

        Raises:
            OutputInvalidError: The answer failed once more than the spec's retries allow.
        """
        output.again = False
        final = next((c for c in calls if c.name == FINAL_TOOL), None)
        if final is None and calls:
            return
        spec = output.spec
        try:
            if final is not None:
                value = spec.parse_call(final.arguments)
            else:
                value = spec.parse(text_of(run.message) if run.message is not None else "")
        except OutputProblem as problem:
            output.failures += 1
            if output.failures > spec.max_retries:
                raise _invalid(output, problem) from None
            output.again = True
            async for event in self._ask_again(output, problem, final, calls):
                yield event
            return
        output.result = StructuredOutput(value=value, schema_name=spec.name)
        if final is None:
            run.final = run.message
            return
        for call in calls:
            accepted = call is final
            text = _ACCEPTED if accepted else _NOT_RUN
            async for event in self._answer_events(call, text, "success" if accepted else "error"):
                yield event
        run.final = make_assistant(
            self.kind, json.dumps(output.result.as_json(), ensure_ascii=False), name=self.name
        )
        self._write(run.final)

    async def _ask_again(
        self,
        output: ReplyOutput,
        problem: OutputProblem,
        final: ToolCall | None,
        calls: list[ToolCall],
    ) -> AsyncIterator[AgentEvent]:
        """Tell the model why its answer was refused: in the final-answer call's error
        result, or in a hint after its text."""
        name = output.spec.name
        if final is not None:
            for call in calls:
                text = (
                    f"Error: the answer is not a valid {name} {problem}. Call {FINAL_TOOL} "
                    "again with a corrected answer."
                    if call is final
                    else _NOT_RUN
                )
                async for event in self._answer_events(call, text, "error"):
                    yield event
            return
        how = (
            f"Call the {FINAL_TOOL} tool with your answer as its arguments."
            if output.strategy == "tool"
            else "Answer again with only the JSON value, nothing else."
        )
        text = f"Your answer is not a valid {name} {problem}. {how}"
        hint_id = new_id()
        self._write(make_hint(self.kind, text, "output", id=hint_id))
        yield HintBlockEvent(reply_id=self.reply_id, block_id=hint_id, text=text, source="output")

    def _take_direct_answer(self, run: ReplyRun, output: ReplyOutput) -> None:
        """A return-directly tool ended the reply: its result is the answer, so it must be a
        valid one (the model cannot be asked again).

        Raises:
            OutputInvalidError: The result is not JSON valid for the schema.
        """
        text = text_of(run.final) if run.final is not None else ""
        try:
            value = output.spec.parse(text)
        except OutputProblem as problem:
            output.failures += 1
            raise _invalid(output, problem) from None
        output.result = StructuredOutput(value=value, schema_name=output.spec.name)


def _invalid(output: ReplyOutput, problem: OutputProblem) -> OutputInvalidError:
    name = output.spec.name
    return OutputInvalidError(
        f"the answer does not match output schema {name} after {output.failures} tries: {problem}",
        metadata={
            "schemaName": name,
            "path": problem.path,
            "validatorMessage": problem.message,
            "attempts": str(output.failures),
        },
    )
