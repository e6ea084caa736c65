"""Clients and servers agree on keepalive, so long-lived streams never get GOAWAY
``too_many_pings``."""

from __future__ import annotations

from hookmesh._security import CLIENT_KEEPALIVE, SERVER_KEEPALIVE


def test_servers_accept_the_pings_clients_send() -> None:
    client, server = dict(CLIENT_KEEPALIVE), dict(SERVER_KEEPALIVE)
    assert server["grpc.http2.min_ping_interval_without_data_ms"] < client["grpc.keepalive_time_ms"]
    assert client["grpc.keepalive_permit_without_calls"] == 1
    assert server["grpc.keepalive_permit_without_calls"] == 1
