"""Built-in middlewares, one module each.

Each class is importable from here (``from hookmesh.middleware.builtin import
SkillsMiddleware``) or from its module; a module is imported only when its class is first
asked for, so the ones needing optional services cost nothing until used.
"""

from __future__ import annotations

import importlib
from typing import Any

_MODULES = {
    "AgentsMdMiddleware": "agents_md",
    "BudgetMiddleware": "budget",
    "CallLimitMiddleware": "call_limits",
    "FileMemoryMiddleware": "file_memory",
    "FilesystemMiddleware": "filesystem",
    "HandoffMiddleware": "handoff",
    "HumanReviewMiddleware": "human_review",
    "JudgeGuardrail": "guardrails",
    "LengthGuardrail": "guardrails",
    "McpToolsMiddleware": "mcp_tools",
    "MemoryMiddleware": "memory",
    "MetricsMiddleware": "metrics",
    "ModelFallbackMiddleware": "fallback",
    "ModelRetryMiddleware": "retry",
    "PIIMiddleware": "pii",
    "PatchToolCallsMiddleware": "patch_tool_calls",
    "PatternGuardrail": "guardrails",
    "PlanExecuteMiddleware": "plan_execute",
    "PropagatedLimitMiddleware": "propagated_limits",
    "RAGMiddleware": "rag",
    "ReductionMiddleware": "reduction",
    "RemoteAgentMiddleware": "remote_agent",
    "SkillsMiddleware": "skills",
    "SummarizationMiddleware": "summarization",
    "SupervisorMiddleware": "supervisor",
    "TTSMiddleware": "tts",
    "TasksMiddleware": "tasks",
    "TimeoutMiddleware": "timeouts",
    "ToolRetryMiddleware": "retry",
    "ToolSchemaGuardrail": "guardrails",
    "ToolSearchMiddleware": "tool_search",
    "ToolSelectorMiddleware": "tool_selector",
    "TracingMiddleware": "tracing",
}


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


__all__ = sorted(_MODULES)
