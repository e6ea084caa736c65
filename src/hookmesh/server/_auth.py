"""Who is calling: bearer tokens and mTLS subjects mapped to principals, one config for every
server."""

from __future__ import annotations

import hmac
import ipaddress
import logging
import os
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

import grpc
from pydantic import BaseModel, ConfigDict, Field, model_validator

from hookmesh._security import ServerTLS
from hookmesh.errors import RequestError

log = logging.getLogger("hookmesh.auth")

ANONYMOUS = "anonymous"
"""The principal of every caller when a server checks no credentials."""
DEFAULT_PRINCIPAL = "default"
"""The principal of a token listed without a name."""
USER_HEADER = "x-hookmesh-user"
"""Metadata key a trusted gateway uses to name the end user it calls for."""
OPEN_SERVICES = (
    "grpc.health.v1.Health",
    "grpc.reflection.v1alpha.ServerReflection",
    "grpc.reflection.v1.ServerReflection",
)
"""Services every server answers without credentials (unless configured otherwise)."""

_MAX_USER_CHARS = 128


@dataclass(frozen=True)
class Caller:
    """Who a call comes from and whom it acts for."""

    principal: str
    """The authenticated principal."""
    user: str
    """The end user: the principal, or the user a trusted gateway named in its header."""
    trusted: bool = False
    """Whether the principal is a trusted gateway (it may act for any user)."""


caller_var: ContextVar[Caller | None] = ContextVar("hookmesh_caller", default=None)
"""The caller of the RPC being served; None when the server checks no credentials."""


def current_principal() -> str:
    """The authenticated caller of the RPC this task serves (``anonymous`` without auth)."""
    caller = caller_var.get()
    return ANONYMOUS if caller is None else caller.principal


def current_user() -> str:
    """The end user the RPC this task serves acts for (see `AuthConfig.trusted_gateways`)."""
    caller = caller_var.get()
    return ANONYMOUS if caller is None else caller.user


def scoped_user(requested: str, field: str) -> str:
    """The user a request may act for, given the user it names (empty: none named).

    Without authentication the request is believed (a loopback deployment). A trusted gateway
    acts for the user of its ``x-hookmesh-user`` header, or, without one, for the user the
    request names. Any other caller acts only for itself.

    Raises:
        RequestError: PERMISSION_DENIED (reason ``USER_NOT_ALLOWED``) when the request names
            another user; INVALID_ARGUMENT when a gateway names nobody.
    """
    caller = caller_var.get()
    if caller is None:
        return requested
    if caller.trusted and caller.user == caller.principal:
        if not requested:
            raise RequestError(
                grpc.StatusCode.INVALID_ARGUMENT,
                "USER_REQUIRED",
                f"{field}: a gateway must name the user it acts for",
                metadata={"field": field},
            )
        return requested
    if requested and requested != caller.user:
        raise RequestError(
            grpc.StatusCode.PERMISSION_DENIED,
            "USER_NOT_ALLOWED",
            f"{field}: this caller may act only for its own user",
            metadata={"field": field},
        )
    return caller.user


class TLSConfig(BaseModel):
    """TLS for a server; file paths (PEM)."""

    model_config = ConfigDict(extra="forbid")

    cert: str
    """Certificate chain."""
    key: str
    """Private key (a secret: keep the file 0600)."""
    client_ca: str | None = None
    """Require client certificates signed by this CA (mTLS)."""


class AuthConfig(BaseModel):
    """How a server checks its callers (docs/security.md). Nothing configured: every caller
    is ``anonymous``, which is safe only on loopback."""

    model_config = ConfigDict(extra="forbid")

    token_env: str | None = None
    """Environment variable holding accepted tokens: entries ``TOKEN`` (principal
    ``default``) or ``PRINCIPAL:TOKEN``, separated by commas or newlines."""
    token_file: str | None = None
    """File of accepted tokens, one entry per line as in `token_env` (``#`` comments); list
    the old and the new token while rotating."""
    tls: TLSConfig | None = None
    """Serve TLS (mTLS with `tls.client_ca`); plaintext when unset."""
    client_principals: dict[str, str] = Field(default_factory=dict)
    """mTLS: certificate common name → principal; an unlisted name is its own principal."""
    trusted_gateways: list[str] = Field(default_factory=list)
    """Principals allowed to name the end user they call for in the ``x-hookmesh-user``
    header (a gateway, or the agent service calling memory)."""
    open_services: list[str] = Field(default_factory=lambda: list(OPEN_SERVICES))
    """Services answered without credentials (health and reflection by default)."""

    @model_validator(mode="after")
    def _mtls_needs_tls(self) -> AuthConfig:
        if self.client_principals and (self.tls is None or self.tls.client_ca is None):
            raise ValueError("client_principals needs tls.client_ca (mTLS)")
        return self

    def checks_callers(self) -> bool:
        """Whether calls need a token or a client certificate."""
        return bool(self.token_env or self.token_file) or (
            self.tls is not None and self.tls.client_ca is not None
        )

    def server_tls(self) -> ServerTLS | None:
        """The credentials to serve with."""
        if self.tls is None:
            return None
        return ServerTLS(self.tls.cert, self.tls.key, self.tls.client_ca)


def parse_tokens(text: str, source: str) -> dict[str, str]:
    """Token → principal from entries ``TOKEN`` or ``PRINCIPAL:TOKEN`` (commas, newlines).

    Raises:
        ValueError: An entry is malformed or no token is given (never quoting a token).
    """
    tokens: dict[str, str] = {}
    for number, raw in enumerate(text.replace(",", "\n").splitlines(), start=1):
        entry = raw.split("#", 1)[0].strip()
        if not entry:
            continue
        principal, sep, token = entry.rpartition(":")
        principal = principal.strip() if sep else DEFAULT_PRINCIPAL
        token = token.strip()
        if not token or not principal or any(c.isspace() for c in token):
            raise ValueError(f"{source}: entry {number} is not TOKEN or PRINCIPAL:TOKEN")
        if principal == ANONYMOUS:
            raise ValueError(f"{source}: entry {number}: {ANONYMOUS!r} is reserved")
        tokens[token] = principal
    if not tokens:
        raise ValueError(f"{source} holds no token")
    return tokens


def load_tokens(config: AuthConfig) -> dict[str, str]:
    """Every accepted token with its principal, from the variable and the file.

    Raises:
        ValueError: The variable is unset or the file unreadable or malformed.
    """
    tokens: dict[str, str] = {}
    if config.token_env:
        value = os.environ.get(config.token_env, "")
        if not value.strip():
            raise ValueError(f"token_env: environment variable {config.token_env} is unset")
        tokens.update(parse_tokens(value, f"environment variable {config.token_env}"))
    if config.token_file:
        try:
            text = Path(config.token_file).read_text()
        except OSError as exc:
            raise ValueError(f"token_file {config.token_file}: {exc.strerror}") from None
        tokens.update(parse_tokens(text, f"token_file {config.token_file}"))
    return tokens


class Authenticator:
    """Maps a call's credentials to a principal; constant-time token comparison.

    Args:
        tokens: Accepted token → principal (secrets: never logged).
        mtls: Whether clients present verified certificates (then they identify the caller).
        client_principals: Certificate common name → principal.
        trusted_gateways: Principals whose ``x-hookmesh-user`` header is believed.
    """

    def __init__(
        self,
        tokens: Mapping[str, str],
        *,
        mtls: bool = False,
        client_principals: Mapping[str, str] | None = None,
        trusted_gateways: Sequence[str] = (),
    ) -> None:
        self._tokens = [(f"Bearer {t}".encode(), p) for t, p in tokens.items()]
        self._mtls = mtls
        self._subjects = dict(client_principals or {})
        self._gateways = frozenset(trusted_gateways)

    @classmethod
    def from_config(cls, config: AuthConfig) -> Authenticator | None:
        """The authenticator `config` describes, or None when it checks no callers."""
        if not config.checks_callers():
            return None
        return cls(
            load_tokens(config),
            mtls=config.tls is not None and config.tls.client_ca is not None,
            client_principals=config.client_principals,
            trusted_gateways=config.trusted_gateways,
        )

    def authenticate(
        self, metadata: Sequence[tuple[str, str | bytes]], context: grpc.aio.ServicerContext
    ) -> Caller:
        """The caller of a call with `metadata`.

        Raises:
            RequestError: No acceptable token or certificate, or a user header from a principal
                that is not a trusted gateway.
        """
        principal = self._principal(metadata, context)
        user = principal
        trusted = principal in self._gateways
        if sum(1 for key, _ in metadata if key == USER_HEADER) > 1:
            raise RequestError(
                grpc.StatusCode.PERMISSION_DENIED,
                "INVALID_USER_HEADER",
                f"send {USER_HEADER} once: one call acts for one user",
            )
        for key, value in metadata:
            if key == USER_HEADER:
                named = value.decode() if isinstance(value, bytes) else value
                if principal not in self._gateways:
                    raise RequestError(
                        grpc.StatusCode.PERMISSION_DENIED,
                        "UNTRUSTED_GATEWAY",
                        f"principal {principal!r} may not act for another user",
                    )
                if not named or len(named) > _MAX_USER_CHARS:
                    raise RequestError(
                        grpc.StatusCode.PERMISSION_DENIED,
                        "INVALID_USER_HEADER",
                        f"{USER_HEADER} must hold 1-{_MAX_USER_CHARS} characters",
                    )
                user = named
        return Caller(principal, user, trusted)

    def _principal(
        self, metadata: Sequence[tuple[str, str | bytes]], context: grpc.aio.ServicerContext
    ) -> str:
        given: list[bytes] = []
        for key, value in metadata:
            if key == "authorization":
                given.append(value.encode() if isinstance(value, str) else value)
        if len(given) > 1:
            # NOTE(auth): a proxy that adds its own header in front of the caller's, or a
            # caller trying tokens in one call: which one counts is ambiguous, so none does.
            raise RequestError(
                grpc.StatusCode.UNAUTHENTICATED,
                "MULTIPLE_CREDENTIALS",
                "send exactly one 'authorization' header",
                metadata={"headerCount": str(len(given))},
            )
        for candidate in given:
            found = None
            for expected, principal in self._tokens:
                # NOTE(auth): compare with every token, so timing does not reveal which one.
                if hmac.compare_digest(candidate, expected):
                    found = principal
            if found is not None:
                return found
        if self._mtls and not given:
            names = context.auth_context().get("x509_common_name") or []
            if names:
                name = names[0].decode()
                return self._subjects.get(name, name)
        if given:
            raise RequestError(
                grpc.StatusCode.UNAUTHENTICATED, "INVALID_TOKEN", "the bearer token is not valid"
            )
        raise RequestError(
            grpc.StatusCode.UNAUTHENTICATED,
            "CREDENTIALS_REQUIRED",
            "this server requires 'authorization: Bearer <token>'"
            + (" or a client certificate" if self._mtls else ""),
        )


def is_loopback(address: str) -> bool:
    """Whether `address` (``host:port`` or ``unix:…``) only accepts local connections."""
    if address.startswith("unix:"):
        return True
    host = address.rpartition(":")[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
