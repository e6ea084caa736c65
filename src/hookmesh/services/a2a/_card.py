"""The agent card: who the agent is, where and how to call it, and its skills (the agent
service's tools and middlewares, read with DescribeAgent)."""

from __future__ import annotations

import logging
import os
import time

from a2a.types import a2a_pb2
from a2a.utils.constants import PROTOCOL_VERSION_CURRENT, TransportProtocol

from hookmesh.a2a import LIMITS_EXTENSION_URI
from hookmesh.client import AgentClient, AgentClientError, AgentInfo
from hookmesh.services.a2a._config import A2AServerConfig

log = logging.getLogger("hookmesh.a2a")

BEARER = "bearer"
"""Name of the card's security scheme: the suite's bearer token."""
JSONRPC_PATH = "/"
"""Where the JSON-RPC binding is served."""
REST_PATH = "/v1"
"""Prefix of the HTTP+JSON binding."""
_DESCRIBE_TIMEOUT = 5.0
_MODES = ["text/plain", "application/json", "image/*", "audio/*", "video/*", "application/*"]


def base_card(
    config: A2AServerConfig, http_url: str, grpc_address: str | None
) -> a2a_pb2.AgentCard:
    """The card without skills: interfaces, capabilities, the bearer scheme."""
    interfaces = [
        a2a_pb2.AgentInterface(
            url=http_url.rstrip("/") + JSONRPC_PATH,
            protocol_binding=TransportProtocol.JSONRPC.value,
            protocol_version=PROTOCOL_VERSION_CURRENT,
        ),
        a2a_pb2.AgentInterface(
            url=http_url.rstrip("/") + REST_PATH,
            protocol_binding=TransportProtocol.HTTP_JSON.value,
            protocol_version=PROTOCOL_VERSION_CURRENT,
        ),
    ]
    if grpc_address:
        interfaces.append(
            a2a_pb2.AgentInterface(
                url=grpc_address,
                protocol_binding=TransportProtocol.GRPC.value,
                protocol_version=PROTOCOL_VERSION_CURRENT,
            )
        )
    card = a2a_pb2.AgentCard(
        name="hookmesh agent",
        description="A hookmesh agent.",
        supported_interfaces=interfaces,
        version=config.version,
        capabilities=a2a_pb2.AgentCapabilities(
            streaming=True,
            push_notifications=False,
            extensions=[
                a2a_pb2.AgentExtension(
                    uri=LIMITS_EXTENSION_URI,
                    description="Honours the caller's tool-call, token, cost and deadline "
                    "limits (message metadata hookmeshLimits) and reports what it spent "
                    "(final status update metadata hookmeshSpent).",
                )
            ],
        ),
        default_input_modes=_MODES,
        default_output_modes=_MODES,
        skills=[_conversation("A hookmesh agent.")],
    )
    card.security_schemes[BEARER].http_auth_security_scheme.CopyFrom(
        a2a_pb2.HTTPAuthSecurityScheme(
            scheme="Bearer", description="The hookmesh suite's bearer token (docs/security.md)."
        )
    )
    if config.require_token:
        requirement = card.security_requirements.add()
        requirement.schemes[BEARER].SetInParent()
    return card


def _conversation(description: str) -> a2a_pb2.AgentSkill:
    return a2a_pb2.AgentSkill(
        id="conversation",
        name="conversation",
        description=description,
        tags=["chat"],
    )


def with_skills(card: a2a_pb2.AgentCard, info: AgentInfo) -> a2a_pb2.AgentCard:
    """`card` with the agent's name, description and one skill per tool (tagged with the
    middleware contributing it) after a general conversation skill."""
    out = a2a_pb2.AgentCard()
    out.CopyFrom(card)
    out.name = info.agent_name or card.name
    out.description = info.description or f"The hookmesh agent {info.agent_name}."
    del out.skills[:]
    out.skills.append(_conversation(out.description))
    for tool in info.tools:
        tags = ["tool", f"middleware:{tool.middleware_key}" if tool.middleware_key else "agent"]
        if tool.read_only:
            tags.append("read-only")
        if tool.needs_confirmation:
            tags.append("needs-confirmation")
        out.skills.append(
            a2a_pb2.AgentSkill(
                id=tool.name, name=tool.name, description=tool.description, tags=tags
            )
        )
    return out


class CardSource:
    """Serves the card with the agent's current description, read at most every
    `card_ttl_seconds` (the last good card, or the base one, when the agent is down)."""

    def __init__(self, config: A2AServerConfig, client: AgentClient, card: a2a_pb2.AgentCard):
        self.base = card
        self._client = client
        self._ttl = config.card_ttl_seconds
        self._token = os.environ.get(config.token_env) if config.token_env else None
        self._card = card
        self._read_at: float | None = None

    async def __call__(self, unused_card: a2a_pb2.AgentCard) -> a2a_pb2.AgentCard:
        now = time.monotonic()
        if self._read_at is not None and now - self._read_at < self._ttl:
            return self._card
        try:
            info = await self._client.describe(timeout=_DESCRIBE_TIMEOUT, token=self._token)
        except AgentClientError as exc:
            log.warning("cannot read the agent's description for the card: %s", exc.message)
            return self._card
        self._card, self._read_at = with_skills(self.base, info), now
        return self._card
