"""The agent service's configuration: one YAML file, overridable by HOOKMESH_* variables."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from hookmesh.models import ModelConfig, ScriptedModelConfig
from hookmesh.remote import BreakerSettings
from hookmesh.server import ServiceSettings, load_settings


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Rollout(_Strict):
    """How a new version of a middleware is tried on live traffic (docs/rollout.md)."""

    mode: Literal["shadow", "canary"]
    """``shadow``: the candidate sees the sessions' invocations and its decisions are compared
    with the live middleware's, never applied; ``canary``: it serves those sessions instead."""
    share: float = Field(0.1, ge=0, le=1)
    """Fraction of sessions the candidate shadows or serves (sticky: by a hash of the session
    id, the same on every replica)."""
    max_failed_share: float | None = Field(None, gt=0, le=1)
    """Canary: roll back at once when more than this fraction of its replies failed; unset:
    never automatically."""
    min_replies: int = Field(20, ge=1)
    """Canary: replies it must have served before `max_failed_share` is judged."""
    sample_size: int = Field(20, ge=1, le=1000)
    """Shadow: most recent disagreements kept for `hookmesh admin rollout status`."""


class RolloutConfig(_Rollout):
    """A new version of a remote middleware: another sidecar."""

    target: str = Field(min_length=1)
    """``host:port`` (or ``unix:///path``) of the candidate's sidecar; TLS, token and timeout
    are the entry's."""


class LocalRolloutConfig(_Rollout):
    """A new version of a local middleware: another class or factory in the agent's process."""

    import_path: str = Field(alias="import", min_length=1)
    """``package.module:attribute`` of the candidate (a class, a factory or an instance)."""
    params: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments for the candidate's class or factory."""


class LocalMiddlewareConfig(_Strict):
    """A middleware running in the agent's process."""

    type: Literal["local"] = "local"
    import_path: str = Field(alias="import")
    """``package.module:attribute`` (a class, a factory or an instance)."""
    params: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments for the class or factory."""
    before: list[str] = Field(default_factory=list)
    """Keys of middlewares this one must run before (it wraps them), whatever the order."""
    after: list[str] = Field(default_factory=list)
    """Keys of middlewares this one must run after (they wrap it)."""
    rollout: LocalRolloutConfig | None = None
    """A candidate version shadowing it or serving a share of sessions; unset: none."""


class RemoteTLSConfig(_Strict):
    """TLS to a sidecar; file paths."""

    ca_cert: str | None = None
    """CA to trust (system roots when unset)."""
    client_cert: str | None = None
    """Client certificate for mTLS."""
    client_key: str | None = None
    """Client key for mTLS."""
    server_name: str = ""
    """Expected certificate name when it differs from the target host."""


class BreakerConfig(_Strict):
    """A sidecar's circuit breaker (docs/security.md, "Sidecars that hang")."""

    misses: int = Field(3, ge=1, le=1000)
    """Consecutive missed message deadlines that open the circuit (an answer in between
    resets the count)."""
    backoff_seconds: float = Field(5.0, gt=0, le=86400, allow_inf_nan=False)
    """How long the circuit stays open before the first probe."""
    max_backoff_seconds: float = Field(60.0, gt=0, le=86400, allow_inf_nan=False)
    """The back-off doubles after each failed probe, up to this."""

    @model_validator(mode="after")
    def _max_covers_backoff(self) -> BreakerConfig:
        if self.max_backoff_seconds < self.backoff_seconds:
            raise ValueError(
                f"max_backoff_seconds ({self.max_backoff_seconds:g}) must be at least "
                f"backoff_seconds ({self.backoff_seconds:g})"
            )
        return self

    def settings(self) -> BreakerSettings:
        """The remote link's settings."""
        return BreakerSettings(self.misses, self.backoff_seconds, self.max_backoff_seconds)


class RemoteMiddlewareConfig(_Strict):
    """A middleware served by a sidecar."""

    type: Literal["remote"] = "remote"
    target: str = ""
    """``host:port`` (or ``unix:///path``) of the sidecar."""
    sidecar: str = ""
    """Or: the name of a sidecar that `hookmesh up` starts (its address is filled in)."""
    failure_mode: Literal["fail_closed", "fail_open"] | None = None
    """What a sidecar failure does to the reply; unset: the sidecar's preference (Describe),
    ``fail_closed`` when it states none. A ``fail_open`` sidecar may be down at start."""
    timeout: float = Field(5.0, gt=0)
    """Seconds to wait for each sidecar message."""
    tls: RemoteTLSConfig | None = None
    """TLS settings; plaintext when unset."""
    token_env: str | None = None
    """Environment variable holding the bearer token."""
    breaker: BreakerConfig = Field(default_factory=BreakerConfig)
    """When the sidecar's circuit opens after missed deadlines, and how it is probed."""
    before: list[str] = Field(default_factory=list)
    """Keys of middlewares this one must run before (it wraps them), whatever the order."""
    after: list[str] = Field(default_factory=list)
    """Keys of middlewares this one must run after (they wrap it)."""
    rollout: RolloutConfig | None = None
    """A candidate version shadowing it or serving a share of sessions; unset: none."""


MiddlewareConfig = Annotated[
    LocalMiddlewareConfig | RemoteMiddlewareConfig, Field(discriminator="type")
]


class SidecarConfig(_Strict):
    """A sidecar `hookmesh up` starts."""

    name: str
    """Referred to by remote middlewares' `sidecar`."""
    middleware: str
    """``package.module:attribute`` to serve."""
    listen: str = "127.0.0.1:0"
    """Address; port 0 picks a free one."""
    token_env: str | None = None
    """Environment variable holding the tokens the sidecar accepts (``--token-env``)."""


class OutputSchemaConfig(_Strict):
    """The structured answer every reply asks for unless its request names another
    (docs/structured-output.md)."""

    name: str = "output"
    """The shape's name: 1-64 characters of A-Z a-z 0-9 _ -."""
    json_schema: dict[str, Any] = Field(alias="schema")
    """The JSON Schema the answer must satisfy."""
    description: str = ""
    """What the answer is for, told to the model."""
    strategy: Literal["auto", "native", "tool"] = "auto"
    """How the model is asked: its JSON-schema mode, a final-answer tool, or chosen."""
    max_retries: int = Field(2, ge=0, le=10)
    """Times the model is asked again after an answer that does not validate."""


class AgentSettings(_Strict):
    """The agent itself."""

    name: str = "assistant"
    """Reported in reply_start and traces."""
    description: str = ""
    """What the agent does, for gateways (the A2A agent card); empty by default."""
    system_prompt: str = "You are a helpful assistant."
    """Base system prompt."""
    kind: Literal["flat", "agentic"] = "flat"
    """Message kind of every session's context."""
    max_iters: int = Field(20, ge=1, le=1000)
    """Most reasoning steps per reply."""
    model: str = "default"
    """Name of the default model in `models`."""
    allow_model_override: bool = False
    """Whether ReplyOptions.model may pick another configured model."""
    output_schema: OutputSchemaConfig | None = None
    """The structured answer replies ask for by default; unset: plain answers."""


def _default_models() -> dict[str, ModelConfig]:
    return {"default": ScriptedModelConfig()}


class SessionsConfig(_Strict):
    """How long sessions are kept (swept in the background, docs/services/agent.md) and, on
    PostgreSQL, how replicas share them (docs/deploy.md)."""

    ttl_seconds: float | None = Field(None, gt=0)
    """Delete sessions not updated for this long (paused ones too); unset keeps them."""
    max_count: int | None = Field(None, ge=1)
    """Keep at most this many sessions (over all principals), deleting the least recently
    updated first; unset for no limit."""
    sweep_interval_seconds: float = Field(60.0, gt=0)
    """How often the sweep runs (also once at start)."""
    lease_seconds: float = Field(30.0, gt=0)
    """PostgreSQL store: how long a reply's lease on its session outlives the replica's last
    renewal (every third of it); a replica that dies frees its leases at once, one that
    hangs after this long."""
    namespace: str = Field("agent", pattern=r"^[a-z_][a-z0-9_]{0,62}$")
    """PostgreSQL store: the schema holding the session tables (one per agent service)."""


class DurabilityConfig(_Strict):
    """How replies outlive their replica (docs/durability.md)."""

    mode: Literal["step", "event", "exit"] = "step"
    """When a reply's progress is saved: at each step boundary, at each event, or only at
    its end (then a reply dies with its replica, and a caller going away interrupts it).
    A request may choose another (`ReplyOptions.durability`)."""
    outcome_unknown: Literal["ask", "tell_model", "fail"] = "ask"
    """What a continued reply does with a call cut off mid-run whose tool is not safe to
    run twice: ask the user again, tell the model the outcome is unknown, or fail."""
    takeover_seconds: float = Field(2.0, gt=0)
    """How often a replica looks for replies cut off elsewhere to continue (a replica also
    continues one at once when a client re-attaches to it)."""
    journal_seconds: float = Field(3600.0, gt=0)
    """How long the events of a reply that ended stay, for clients that re-attach late."""


class ErasureConfig(_Strict):
    """The stores beside the agent's own that `AdminService.ForgetUser` erases
    (docs/security.md, "Data lifecycle")."""

    a2a_task_store: str | None = None
    """The A2A server's `task_store` (``sqlite:///path`` or ``postgresql://...``; may hold a
    secret): its tasks of the user's sessions are deleted. Unset: A2A tasks are not reached."""
    memory: str | None = None
    """``host:port`` of the memory service whose memories of the user are deleted. The agent
    service must be one of its `trusted_gateways` when it checks credentials. Unset: not
    reached."""
    memory_token_env: str | None = None
    """Environment variable holding the bearer token for the memory service (a secret)."""
    retrieval: str | None = None
    """``host:port`` of the retrieval service whose documents the user owns are deleted (in
    every base). The agent service must be one of its `trusted_gateways` when it checks
    credentials. Unset: not reached."""
    retrieval_token_env: str | None = None
    """Environment variable holding the bearer token for the retrieval service (a secret)."""


class AgentServiceConfig(ServiceSettings):
    """Everything `hookmesh serve agent` reads (see docs/config.md)."""

    model_config = SettingsConfigDict(
        env_prefix="HOOKMESH_", env_nested_delimiter="__", extra="forbid"
    )

    listen: str = "127.0.0.1:7000"
    """Address to serve on; port 0 picks a free one."""
    store: str = "sqlite:///hookmesh-data/agent.db"
    """Session store: ``sqlite:///path`` (WAL, one process) or
    ``postgresql://user:password@host:port/database`` (replicas; may hold a secret)."""
    max_request_bytes: int = Field(4 * 1024 * 1024, ge=1024)
    """Largest accepted request; bigger ones get INVALID_ARGUMENT."""
    max_messages: int = Field(256, ge=1)
    """Most messages in one Reply request."""
    grace_seconds: float = Field(10.0, ge=0)
    """On SIGTERM, in-flight replies get this long before they are interrupted."""
    admin_principals: list[str] = Field(default_factory=list)
    """Principals that may call the AdminService (ReloadMiddlewares); empty: nobody. List
    ``anonymous`` only on a loopback server that checks no credentials."""
    sessions: SessionsConfig = Field(default_factory=SessionsConfig)
    """Session retention; sessions are kept forever by default."""
    durability: DurabilityConfig = Field(default_factory=DurabilityConfig)
    """When replies are saved and how a cut-off reply continues."""
    erasure: ErasureConfig = Field(default_factory=ErasureConfig)
    """The other services' stores a ForgetUser reaches."""
    agent: AgentSettings = Field(default_factory=AgentSettings)
    """The agent."""
    models: dict[str, ModelConfig] = Field(default_factory=_default_models)
    """Models by name."""
    tools: list[str] = Field(default_factory=list)
    """Tools as ``package.module:attribute`` import paths."""
    middlewares: list[MiddlewareConfig] = Field(default_factory=list)
    """Middlewares, outermost first."""
    sidecars: list[SidecarConfig] = Field(default_factory=list)
    """Sidecars `hookmesh up` starts before the agent."""
    services: dict[Literal["retrieval", "memory", "tts", "agui", "a2a", "mcp"], dict[str, Any]] = (
        Field(default_factory=dict)
    )
    """Services `hookmesh up` starts with the agent, each with overrides of its own config
    (docs/services/*.md): retrieval, memory and TTS before it; the AG-UI and A2A gateways
    after it (pointed at it) and the MCP server (over HTTP, pointed at the services started).
    A local middleware param ``"service:NAME"`` becomes that service's address."""

    @field_validator("models")
    @classmethod
    def _has_models(cls, models: dict[str, Any]) -> dict[str, Any]:
        if not models:
            raise ValueError("configure at least one model")
        return models


def load_config(path: str | Path | None = None, **overrides: Any) -> AgentServiceConfig:
    """Read the YAML file at `path` (if any), then apply HOOKMESH_* variables and `overrides`.

    Raises:
        ValueError: The file is unreadable or invalid; the message names the bad keys.
    """
    config = load_settings(AgentServiceConfig, path, overrides)
    model = config.models.get(config.agent.model)
    if model is None:
        raise ValueError(
            f"agent.model {config.agent.model!r} is not one of models: {', '.join(config.models)}"
        )
    return config


def secret(env_name: str | None) -> str | None:
    """The value of the environment variable `env_name` (None when unset or not named)."""
    return os.environ.get(env_name) if env_name else None
