"""AGENTS.md: project instructions shown to the model before the conversation, at every model"""

from hookmesh.middleware.builtin.agents_md._middleware import (
    AGENTS_MD_METADATA_KEY,
    DEFAULT_HEADER,
    WARNING_EVENT,
    AgentsMdMiddleware,
)

__all__ = [
    "AGENTS_MD_METADATA_KEY",
    "DEFAULT_HEADER",
    "WARNING_EVENT",
    "AgentsMdMiddleware",
]
