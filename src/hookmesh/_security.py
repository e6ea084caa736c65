"""Channels between hookmesh processes: TLS / mTLS credentials and matching keepalive
policies for clients and servers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from opentelemetry.instrumentation.grpc import aio_client_interceptors

CLIENT_KEEPALIVE: tuple[tuple[str, Any], ...] = (
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
)
"""Clients ping every 30 s, so a dead peer (or a proxy that dropped the stream) is noticed
on long-lived streams."""
SERVER_KEEPALIVE: tuple[tuple[str, Any], ...] = (
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", 20_000),
    ("grpc.http2.max_ping_strikes", 2),
)
"""Servers accept the clients' pings: a server that expects fewer answers them with GOAWAY
``too_many_pings``. Keep the interval below `CLIENT_KEEPALIVE`'s ``keepalive_time_ms``."""


def _read(value: bytes | str | Path | None) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    return Path(value).read_bytes()


@dataclass(frozen=True)
class ClientTLS:
    """How the agent verifies a sidecar, and (for mTLS) proves who it is.

    Each field takes PEM bytes or a file path.
    """

    ca_cert: bytes | str | Path | None = None
    """Root certificates to trust; the system's when None."""
    client_cert: bytes | str | Path | None = None
    """The agent's certificate chain, for mTLS."""
    client_key: bytes | str | Path | None = None
    """The agent's private key, for mTLS (a secret)."""
    server_name: str = ""
    """Expected name in the sidecar's certificate when it differs from the target host."""


@dataclass(frozen=True)
class ServerTLS:
    """The sidecar's certificate, and (for mTLS) the CA its clients must present."""

    cert: bytes | str | Path
    """The sidecar's certificate chain (PEM bytes or path)."""
    key: bytes | str | Path
    """The sidecar's private key (PEM bytes or path; a secret)."""
    client_ca: bytes | str | Path | None = None
    """When set, clients must present a certificate signed by this CA (mTLS)."""


def channel_credentials(tls: ClientTLS) -> tuple[grpc.ChannelCredentials, list[tuple[str, Any]]]:
    """Credentials and channel options for `tls`."""
    creds = grpc.ssl_channel_credentials(
        root_certificates=_read(tls.ca_cert),
        private_key=_read(tls.client_key),
        certificate_chain=_read(tls.client_cert),
    )
    options = [("grpc.ssl_target_name_override", tls.server_name)] if tls.server_name else []
    return creds, options


def open_channel(
    target: str, tls: ClientTLS | None = None, options: Sequence[tuple[str, Any]] = ()
) -> grpc.aio.Channel:
    """A grpc.aio channel to `target`, TLS when `tls` is given, carrying trace context;
    `options` go over the defaults (`CLIENT_KEEPALIVE`)."""
    interceptors = aio_client_interceptors()
    # NOTE(security): gRPC takes the first of repeated options, so the caller's go first.
    if tls is None:
        return grpc.aio.insecure_channel(
            target, options=[*options, *CLIENT_KEEPALIVE], interceptors=interceptors
        )
    creds, tls_options = channel_credentials(tls)
    return grpc.aio.secure_channel(
        target,
        creds,
        options=[*options, *tls_options, *CLIENT_KEEPALIVE],
        interceptors=interceptors,
    )


def server_credentials(tls: ServerTLS) -> grpc.ServerCredentials:
    """Server credentials for `tls`; mTLS when a client CA is given."""
    key, cert = _read(tls.key), _read(tls.cert)
    assert key is not None and cert is not None
    client_ca = _read(tls.client_ca)
    return grpc.ssl_server_credentials(
        [(key, cert)], root_certificates=client_ca, require_client_auth=client_ca is not None
    )
