"""The auth layer's pure parts: token entries, where tokens come from, what checks callers,
and which addresses are loopback (docs/security.md). Every malformed entry is its own case,
and none of the errors may quote a token."""

from __future__ import annotations

from pathlib import Path

import pytest

from hookmesh._security import ServerTLS
from hookmesh.server import AuthConfig, Authenticator, is_loopback, load_tokens, parse_tokens


def test_entries_name_their_principal_or_are_the_default() -> None:
    text = "alice:tok-a, bob : tok-b\n# a comment line\n\ntok-plain  # trailing comment\n"
    assert parse_tokens(text, "test") == {
        "tok-a": "alice",
        "tok-b": "bob",
        "tok-plain": "default",
    }


def test_a_principal_may_hold_a_colon_the_token_may_not() -> None:
    assert parse_tokens("svc:eu:tok", "test") == {"tok": "svc:eu"}


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("alice:", 1),  # no token
        (":s3cret", 1),  # no principal
        ("ok:tok-a\nalice:s3 cret", 2),  # whitespace inside the token
        ("ok:tok-a,ok:tok-b,  :s3cret", 3),  # the entry number counts commas too
    ],
)
def test_a_malformed_entry_is_refused_by_its_number(text: str, number: int) -> None:
    with pytest.raises(ValueError, match=f"test: entry {number} is not TOKEN or PRINCIPAL:TOKEN"):
        parse_tokens(text, "test")


def test_the_errors_never_quote_a_token() -> None:
    for text in (":s3cret", "alice:s3 cret", "anonymous:s3cret"):
        with pytest.raises(ValueError) as caught:
            parse_tokens(text, "test")
        assert "s3" not in str(caught.value)


def test_anonymous_is_reserved() -> None:
    with pytest.raises(ValueError, match="entry 1: 'anonymous' is reserved"):
        parse_tokens("anonymous:s3cret", "test")


@pytest.mark.parametrize("text", ["", "  \n# only a comment\n", ",,"])
def test_no_token_at_all_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"^test holds no token$"):
        parse_tokens(text, "test")


def test_tokens_come_from_the_variable_and_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HM_TOKENS", "alice:tok-a")
    path = tmp_path / "tokens"
    path.write_text("# rotating: old and new\nbob:tok-old\nbob:tok-new\n")
    config = AuthConfig(token_env="HM_TOKENS", token_file=str(path))
    assert load_tokens(config) == {"tok-a": "alice", "tok-old": "bob", "tok-new": "bob"}


@pytest.mark.parametrize("value", [None, "", "  \n "])
def test_an_unset_token_variable_is_an_error(
    monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    if value is None:
        monkeypatch.delenv("HM_TOKENS", raising=False)
    else:
        monkeypatch.setenv("HM_TOKENS", value)
    with pytest.raises(ValueError, match="token_env: environment variable HM_TOKENS is unset"):
        load_tokens(AuthConfig(token_env="HM_TOKENS"))


def test_an_unreadable_token_file_is_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(ValueError, match=f"token_file {missing}: No such file"):
        load_tokens(AuthConfig(token_file=str(missing)))


def test_a_malformed_token_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text("# nothing but comments\n")
    with pytest.raises(ValueError, match=f"token_file {path} holds no token"):
        load_tokens(AuthConfig(token_file=str(path)))


def _tls(client_ca: str | None = None) -> dict[str, str | None]:
    return {"cert": "c.pem", "key": "k.pem", "client_ca": client_ca}


@pytest.mark.parametrize(
    ("config", "checks"),
    [
        ({}, False),
        ({"token_env": "HM_TOKENS"}, True),
        ({"token_file": "tokens"}, True),
        ({"tls": _tls()}, False),  # TLS alone encrypts, it does not identify callers
        ({"tls": _tls("ca.pem")}, True),
    ],
)
def test_which_configs_check_callers(config: dict[str, object], checks: bool) -> None:
    auth = AuthConfig.model_validate(config)
    assert auth.checks_callers() is checks
    if not checks:
        assert Authenticator.from_config(auth) is None


def test_the_server_credentials_follow_the_tls_block() -> None:
    assert AuthConfig().server_tls() is None
    tls = AuthConfig.model_validate({"tls": _tls("ca.pem")}).server_tls()
    assert tls == ServerTLS("c.pem", "k.pem", "ca.pem")


def test_client_principals_need_mutual_tls() -> None:
    for tls in (None, _tls()):
        with pytest.raises(ValueError, match=r"client_principals needs tls\.client_ca"):
            AuthConfig.model_validate({"tls": tls, "client_principals": {"cn": "alice"}})
    AuthConfig.model_validate({"tls": _tls("ca.pem"), "client_principals": {"cn": "alice"}})


@pytest.mark.parametrize(
    ("address", "loopback"),
    [
        ("127.0.0.1:50051", True),
        ("127.8.9.10:1", True),
        ("[::1]:50051", True),
        ("localhost:50051", True),
        ("unix:/tmp/hookmesh.sock", True),
        ("0.0.0.0:50051", False),
        ("[::]:50051", False),
        ("10.1.2.3:50051", False),
        ("a.example:50051", False),  # sorts before "localhost"
        ("zz.example:50051", False),  # sorts after it
        ("localhost.example:50051", False),
    ],
)
def test_which_addresses_are_loopback(address: str, loopback: bool) -> None:
    assert is_loopback(address) is loopback
