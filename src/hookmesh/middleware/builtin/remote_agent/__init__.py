"""Remote agents: each configured A2A agent as a tool; its progress streams as nested events.
`RemoteAgent` (one agent's client, a task step at a time) serves handoffs to remote agents too."""

from hookmesh.middleware.builtin.remote_agent._a2a import RemoteAgent, TaskOutcome
from hookmesh.middleware.builtin.remote_agent._middleware import (
    CONFIRM_SUFFIX,
    INPUT_SUFFIX,
    STATUS_EVENT,
    RemoteAgentConfig,
    RemoteAgentMiddleware,
    RemoteAgentUnavailableError,
)

__all__ = [
    "CONFIRM_SUFFIX",
    "INPUT_SUFFIX",
    "STATUS_EVENT",
    "RemoteAgent",
    "RemoteAgentConfig",
    "RemoteAgentMiddleware",
    "RemoteAgentUnavailableError",
    "TaskOutcome",
]
