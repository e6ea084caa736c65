"""The agent: one class running the ReAct loop, its state, tools and chat models."""

from hookmesh.agent._acting import ToolOutcomeUnknownError
from hookmesh.agent._agent import (
    DEFAULT_MAX_ITERS,
    Agent,
    AgentBusyError,
    Output,
    UnknownModelError,
    new_id,
)
from hookmesh.agent._checkpoint import (
    OUTCOME_UNKNOWN,
    Checkpoint,
    OutcomePolicy,
    ReplyHandedOver,
    StepKind,
    StepPoint,
)
from hookmesh.agent._output import (
    DEFAULT_MAX_RETRIES,
    FINAL_TOOL,
    INVALID_OUTPUT_SCHEMA,
    MAX_RETRIES,
    MAX_SCHEMA_BYTES,
    MAX_SCHEMA_DEPTH,
    OutputInvalidError,
    OutputProblem,
    OutputSpec,
    OutputStrategy,
    output_spec,
    output_spec_of,
)
from hookmesh.agent._state import AgentState, OutputState, PendingReply
from hookmesh.schema import Confirmation, ExternalResult, Resume
from hookmesh.tools import Tool, ToolArgumentError, Toolkit, external_tool, tool

__all__ = [
    "DEFAULT_MAX_ITERS",
    "DEFAULT_MAX_RETRIES",
    "FINAL_TOOL",
    "INVALID_OUTPUT_SCHEMA",
    "MAX_RETRIES",
    "MAX_SCHEMA_BYTES",
    "MAX_SCHEMA_DEPTH",
    "OUTCOME_UNKNOWN",
    "Agent",
    "AgentBusyError",
    "AgentState",
    "Checkpoint",
    "Confirmation",
    "ExternalResult",
    "OutcomePolicy",
    "Output",
    "OutputInvalidError",
    "OutputProblem",
    "OutputSpec",
    "OutputState",
    "OutputStrategy",
    "PendingReply",
    "ReplyHandedOver",
    "Resume",
    "StepKind",
    "StepPoint",
    "Tool",
    "ToolArgumentError",
    "ToolOutcomeUnknownError",
    "Toolkit",
    "UnknownModelError",
    "external_tool",
    "new_id",
    "output_spec",
    "output_spec_of",
    "tool",
]
