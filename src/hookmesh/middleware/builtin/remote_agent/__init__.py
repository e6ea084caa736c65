"""Remote agents: each configured A2A agent as a tool; its progress streams as nested events."""

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
    "RemoteAgentConfig",
    "RemoteAgentMiddleware",
    "RemoteAgentUnavailableError",
]
