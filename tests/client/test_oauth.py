"""The client-credentials steps of mcpfast.client.oauth, each a pure function: where discovery
looks (RFC 9728, RFC 8414 and OpenID Discovery order), what it accepts, the token request it
builds (client_secret_basic encoding, client_secret_post, a private_key_jwt assertion that the
client's public key verifies), how a refusal reads, and when a token is refreshed. The whole
flow against a real authorization server is in tests/loadtests/test_swarm_oauth.py."""

from __future__ import annotations

import base64
import json
import random
import re
from pathlib import Path
from urllib.parse import parse_qs

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

from mcpfast.client.oauth import (
    ClientCredentials,
    Discovery,
    OAuthError,
    TokenSource,
    authorization_server_urls,
    protected_resource_urls,
    read_authorization_server,
    read_protected_resource,
    read_token,
    refresh_delay,
    token_request,
)

URL = "https://mcp.example.test/api/mcp"
FOUND = Discovery(URL, "https://as.example.test", "https://as.example.test/token", ("client_secret_basic", "private_key_jwt"), "tools")


def test_protected_resource_urls_challenge_first_then_path_inserted_then_root() -> None:
    www = b'Bearer resource_metadata="https://mcp.example.test/.well-known/oauth-protected-resource/api/mcp", scope="a b"'
    assert protected_resource_urls(URL, www) == [
        "https://mcp.example.test/.well-known/oauth-protected-resource/api/mcp",
        "https://mcp.example.test/.well-known/oauth-protected-resource",
    ]
    assert protected_resource_urls("http://127.0.0.1:8/", None) == ["http://127.0.0.1:8/.well-known/oauth-protected-resource"]


def test_authorization_server_urls_in_the_mcp_order() -> None:
    assert authorization_server_urls("https://as.test/tenant1") == [
        "https://as.test/.well-known/oauth-authorization-server/tenant1",
        "https://as.test/.well-known/openid-configuration/tenant1",
        "https://as.test/tenant1/.well-known/openid-configuration",
    ]
    assert authorization_server_urls("https://as.test") == [
        "https://as.test/.well-known/oauth-authorization-server",
        "https://as.test/.well-known/openid-configuration",
    ]


def test_protected_resource_metadata() -> None:
    doc = {"resource": "https://MCP.example.test/api", "authorization_servers": ["https://as.test"], "scopes_supported": ["a", 1]}
    assert read_protected_resource(json.dumps(doc).encode(), URL) == ("https://MCP.example.test/api", "https://as.test", ("a",))
    for bad, reason in (
        ({**doc, "resource": "https://other.test/api/mcp"}, "not for"),
        ({**doc, "resource": "https://mcp.example.test/ap"}, "not for"),  # a prefix of a segment is not a prefix
        ({**doc, "authorization_servers": []}, "no authorization server"),
        ({"authorization_servers": ["x"]}, "no resource"),
    ):
        with pytest.raises(OAuthError, match=reason):
            read_protected_resource(json.dumps(bad).encode(), URL)
    with pytest.raises(OAuthError, match="not JSON"):
        read_protected_resource(b"<html>", URL)


def test_authorization_server_metadata() -> None:
    doc = {"issuer": "https://as.test", "token_endpoint": "https://as.test/token"}
    assert read_authorization_server(json.dumps(doc).encode(), "https://as.test") == ("https://as.test/token", ("client_secret_basic",))
    with pytest.raises(OAuthError, match=re.escape("for issuer 'https://evil.test'")):
        read_authorization_server(json.dumps({**doc, "issuer": "https://evil.test"}).encode(), "https://as.test")
    with pytest.raises(OAuthError, match="client_credentials"):
        read_authorization_server(json.dumps({**doc, "grant_types_supported": ["authorization_code"]}).encode(), "https://as.test")
    with pytest.raises(OAuthError, match="no token_endpoint"):
        read_authorization_server(json.dumps({"issuer": "https://as.test"}).encode(), "https://as.test")


def test_client_secret_basic_form_encodes_before_base64() -> None:
    headers, body = token_request(ClientCredentials("my client", client_secret="p:ss%"), FOUND, 0)
    user, _, password = base64.b64decode(headers["Authorization"].removeprefix("Basic ")).decode().partition(":")
    assert (user, password) == ("my%20client", "p%3Ass%25")
    form = parse_qs(body.decode())
    assert form == {"grant_type": ["client_credentials"], "resource": [URL], "scope": ["tools"]}


def test_client_secret_post_when_basic_is_not_offered() -> None:
    found = Discovery(URL, FOUND.issuer, FOUND.token_endpoint, ("client_secret_post",), None)
    headers, body = token_request(ClientCredentials("c", client_secret="s", scope="x y"), found, 0)
    assert "Authorization" not in headers
    assert parse_qs(body.decode()) == {
        "grant_type": ["client_credentials"],
        "resource": [URL],
        "scope": ["x y"],
        "client_id": ["c"],
        "client_secret": ["s"],
    }
    with pytest.raises(OAuthError, match="takes no client secret"):
        token_request(ClientCredentials("c", client_secret="s"), Discovery(URL, "i", "t", ("private_key_jwt",), None), 0)


def test_private_key_jwt_assertion(tmp_path: Path) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    pem = tmp_path / "k.pem"
    pem.write_bytes(key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()))
    _, body = token_request(ClientCredentials("c", private_key=str(pem)), FOUND, 1_000_000)
    form = parse_qs(body.decode())
    assert form["client_assertion_type"] == ["urn:ietf:params:oauth:client-assertion-type:jwt-bearer"]
    claims = jwt.decode(
        form["client_assertion"][0], key.public_key(), algorithms=["ES256"], audience=FOUND.issuer, options={"verify_exp": False}
    )
    assert claims["iss"] == claims["sub"] == "c" and claims["exp"] - claims["iat"] == 60 and claims["jti"]
    with pytest.raises(OAuthError, match="does not take private_key_jwt"):
        token_request(ClientCredentials("c", private_key=str(pem)), Discovery(URL, "i", "t", ("client_secret_basic",), None), 0)


def test_bad_credentials_are_refused_when_built(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="needs one of"):
        ClientCredentials("c")
    with pytest.raises(ValueError, match="needs one of"):
        ClientCredentials("c", client_secret="s", private_key="k.pem")
    with pytest.raises(ValueError, match=re.escape("no-such.pem")):
        ClientCredentials("c", private_key=str(tmp_path / "no-such.pem"))
    dsa = tmp_path / "ec384.pem"
    dsa.write_bytes(ec.generate_private_key(ec.SECP384R1()).private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()))
    with pytest.raises(ValueError, match="RSA, P-256 or Ed25519"):
        ClientCredentials("c", private_key=str(dsa))


def test_token_answers() -> None:
    assert read_token(200, b'{"access_token":"t","token_type":"bearer","expires_in":20}').expires_in == 20.0
    assert read_token(200, b'{"access_token":"t","token_type":"Bearer"}').expires_in is None
    for status, body, reason in (
        (
            401,
            b'{"error":"invalid_client","error_description":"client authentication failed"}',
            "http 401 invalid_client (client authentication failed)",
        ),
        (400, b"oops", "http 400"),
        (200, b'{"token_type":"Bearer"}', "without an access_token"),
        (200, b'{"access_token":"t","token_type":"DPoP"}', "not a Bearer token"),
        (200, b'{"access_token":"a b","token_type":"Bearer"}', "whitespace"),
    ):
        with pytest.raises(OAuthError, match=reason.replace("(", r"\(").replace(")", r"\)")):
            read_token(status, body)


def test_refresh_before_expiry_with_jitter() -> None:
    rng = random.Random(7)
    delays = [refresh_delay(100.0, rng) for _ in range(200)]
    assert all(d is not None and 70.0 <= d <= 85.0 for d in delays)
    assert len({round(d or 0, 3) for d in delays}) > 100  # drawn, not fixed
    assert refresh_delay(4.0, rng) == 2.0  # never later than 2 s before expiry
    assert refresh_delay(1.0, rng) == 0.5
    assert refresh_delay(None, rng) is None


def test_one_refresh_per_refused_token() -> None:
    answers = iter(
        [b'{"access_token":"one","token_type":"Bearer","expires_in":600}', b'{"access_token":"two","token_type":"Bearer","expires_in":600}']
    )
    reports: list[BaseException | None] = []

    def fetch(method: str, url: str, headers: dict[str, str], body: bytes | None) -> tuple[int, dict[str, str], bytes]:
        assert (method, url) == ("POST", FOUND.token_endpoint)
        return 200, {}, next(answers)

    src = TokenSource(ClientCredentials("c", client_secret="s"), URL, fetch, lambda ms, n, e: reports.append(e))
    src.found = FOUND
    seen: list[str] = []
    src.listeners.append(seen.append)
    assert src.start() == "one" and src.seconds_to_refresh() > 400
    assert src.invalidate("one") and src.seconds_to_refresh() == 0
    src.refresh()
    assert src.access_token == "two" and seen == ["one", "two"] and reports == [None, None]
    assert not src.invalidate("one")  # a refusal of the old token asks nothing more
    assert not src.invalidate_current(min_age=60.0)  # too young: the refusals may be its predecessor's
