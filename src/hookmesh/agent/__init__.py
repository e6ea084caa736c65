"""The agent: one class running the ReAct loop, its state, tools and chat models."""

from hookmesh.agent._acting import ToolOutcomeUnknownError
from hookmesh.agent._agent import (
    DEFAULT_MAX_ITERS,
    Agent,
    AgentBusyError,
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
from hookmesh.agent._state import AgentState, PendingReply
from hookmesh.schema import Confirmation, ExternalResult, Resume
from hookmesh.tools import Tool, ToolArgumentError, Toolkit, external_tool, tool

__all__ = [
    "DEFAULT_MAX_ITERS",
    "OUTCOME_UNKNOWN",
    "Agent",
    "AgentBusyError",
    "AgentState",
    "Checkpoint",
    "Confirmation",
    "ExternalResult",
    "OutcomePolicy",
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
    "tool",
]
