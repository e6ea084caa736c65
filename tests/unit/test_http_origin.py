"""The HTTP gateways' Host and Origin rules alone, one case per way a header can be wrong or
right: loopback names, configured hosts with and without a port, malformed Host headers,
the gateway's own origin (default ports included), configured and foreign origins. (Through
a real gateway and a raw client: tests/integration/test_http_doors.py.)"""

from __future__ import annotations

import pytest

from hookmesh.server._http_errors import HttpRefusal
from hookmesh.server._http_origin import OriginPolicy

pytestmark = pytest.mark.timeout(30)

LOCAL = OriginPolicy([], [])
"""The default: loopback only, no cross-origin caller."""


def _refusal(policy: OriginPolicy, host: str | None, origin: str | None) -> tuple[int, str]:
    with pytest.raises(HttpRefusal) as refused:
        policy.check(host, origin)
    assert refused.value.message
    return refused.value.status, refused.value.reason


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1:8080",
        "127.0.0.1",
        "127.9.9.9:1",
        "[::1]:8080",
        "[::1]",
        "localhost:8080",
        "LOCALHOST:8080",
        "localhost",
        "chat.localhost:8080",
    ],
)
def test_loopback_hosts_are_served_by_default(host: str) -> None:
    LOCAL.check(host, None)


@pytest.mark.parametrize(
    "host",
    [
        None,
        "",
        "evil.example",
        "evil.example:8080",
        "notlocalhost:8080",
        "localhost.evil.example",
        "0.0.0.0:8080",
        "10.0.0.1:8080",
        "[::2]:8080",
        "localhost:port",  # not a port
        "localhost:99999",  # out of range
        "[::1",  # unclosed
        ":8080",  # no name
        "user@localhost:8080",  # credentials are no part of a Host header
        "@localhost",
        "localhost/x",
        "localhost:8080/x",
        "localhost?x",
    ],
)
def test_other_and_malformed_hosts_get_421(host: str | None) -> None:
    assert _refusal(LOCAL, host, None) == (421, "HOST_NOT_ALLOWED")


def test_a_configured_name_is_served_on_any_port_and_a_name_with_port_on_that_port() -> None:
    policy = OriginPolicy(["Agent.Test", "api.test:8443"], [])
    for host in ("agent.test", "agent.test:1", "AGENT.test:8080", "api.test:8443", "localhost:1"):
        policy.check(host, None)
    for host in ("api.test", "api.test:8444", "other.test:8443", "test:8443", "evil.example"):
        assert _refusal(policy, host, None) == (421, "HOST_NOT_ALLOWED")


def test_a_star_serves_every_host_even_none_or_a_malformed_one() -> None:
    policy = OriginPolicy(["*"], [])
    for host in (None, "", "evil.example:8080", "user@evil.example", "x:port"):
        policy.check(host, None)


def test_a_star_beside_names_still_serves_every_host() -> None:
    OriginPolicy(["agent.test", "*"], []).check("anything.test:1", None)


@pytest.mark.parametrize(
    ("host", "origin"),
    [
        ("127.0.0.1:8080", "http://127.0.0.1:8080"),
        ("localhost:8080", "http://localhost:8080"),
        ("localhost:8080", "HTTP://LOCALHOST:8080"),
        ("[::1]:8080", "http://[::1]:8080"),
        ("localhost", "http://localhost"),
        ("localhost", "http://localhost:80"),  # http's default port, spelt out
        ("localhost:80", "http://localhost"),
        ("localhost", "https://localhost:443"),  # https's
        ("localhost:443", "https://localhost"),
        ("localhost", "https://localhost"),
    ],
)
def test_the_gateways_own_origin_is_served(host: str, origin: str) -> None:
    LOCAL.check(host, origin)


@pytest.mark.parametrize(
    ("host", "origin"),
    [
        ("localhost:8080", "http://evil.example"),
        ("localhost:8080", "http://evil.example:8080"),
        ("localhost:8080", "http://127.0.0.1:8080"),  # another name for the same address
        ("127.0.0.1:8080", "http://localhost:8080"),
        ("localhost:8080", "http://zzz.example:8080"),  # a name sorting after the host's
        ("localhost:8080", "http://localhost:8081"),
        ("localhost:8080", "http://localhost"),
        ("localhost", "http://localhost:8080"),
        ("localhost", "http://localhost:443"),  # not http's default
        ("localhost", "https://localhost:80"),  # not https's
        ("localhost:80", "https://localhost"),
        ("localhost:443", "http://localhost"),
        ("localhost:8080", "null"),  # a sandboxed page or a file
        ("localhost:8080", ""),
        ("localhost:8080", "ftp://localhost:8080"),  # no default port: not a web origin
        ("localhost:8080", "localhost:8080"),  # no scheme
        ("localhost:8080", "http://localhost:port"),
        ("localhost:8080", "http://[::1"),
        ("localhost:8080", "http://:8080"),
    ],
)
def test_another_origin_gets_403(host: str, origin: str) -> None:
    assert _refusal(LOCAL, host, origin) == (403, "ORIGIN_NOT_ALLOWED")


def test_the_host_is_checked_before_the_origin() -> None:
    assert _refusal(LOCAL, "evil.example", "http://evil.example") == (421, "HOST_NOT_ALLOWED")


def test_with_any_host_an_origin_needs_a_host_to_be_its_own() -> None:
    policy = OriginPolicy(["*"], [])
    policy.check("agent.test:1", "http://agent.test:1")
    for host in (None, "", "x:port"):
        assert _refusal(policy, host, "http://agent.test:1") == (403, "ORIGIN_NOT_ALLOWED")
        policy.check(host, None)


def test_configured_origins_are_served_whatever_the_host() -> None:
    policy = OriginPolicy([], ["https://App.test/", "http://other.test:8080"])
    for origin in ("https://app.test", "https://APP.test/", "http://other.test:8080"):
        policy.check("localhost:1", origin)
        assert policy.cross_origin(origin)
    for origin in ("https://app.test:8443", "http://app.test", "http://other.test", "null"):
        assert _refusal(policy, "localhost:1", origin) == (403, "ORIGIN_NOT_ALLOWED")
        assert not policy.cross_origin(origin)
    assert not policy.cross_origin("http://localhost:1")  # its own origin: no CORS headers


def test_a_star_serves_every_origin_as_cross_origin() -> None:
    policy = OriginPolicy([], ["*"])
    for origin in ("http://evil.example", "null", "", "http://[::1"):
        policy.check("localhost:1", origin)
        assert policy.cross_origin(origin)
    assert _refusal(policy, "evil.example", "http://evil.example") == (421, "HOST_NOT_ALLOWED")


def test_a_star_among_origins_is_no_literal_origin() -> None:
    policy = OriginPolicy([], ["https://app.test", "*"])
    assert policy.cross_origin("http://evil.example")
    assert not OriginPolicy([], ["https://app.test"]).cross_origin("*")
    assert not OriginPolicy([], ["*x"]).cross_origin("http://evil.example")
