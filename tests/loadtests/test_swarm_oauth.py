"""The swarm with OAuth client credentials against a real authorization server (node
``oidc-provider``, pinned in tests/authserver and installed by ``make authserver-install``) and
``mcpfast serve --auth-jwks`` trusting its tokens: discovery from the server's 401, one token per
process, refreshed before it expires, every token request an ``oauth:token`` row that the
authorization server's own tally agrees with. A client the token endpoint refuses stops the run
before any load, with exit code 2 and the reason."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from _loadtest_support import Run, start_counting_server, stop
from _support import AUTHSERVER, authserver_node, free_port, start_authserver, stop_process
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat
from jwt.algorithms import ECAlgorithm
from test_swarm_deployed import ENGINES, TOOLS_CALL, agree, locust

SECRET = "swarm-secret-0123456789-abcdefghij"
SCOPE = "mcp:tools"


@dataclass
class Oauth:
    issuer: str
    url: str  # the MCP endpoint
    countfile: Path
    key: Path  # the private_key_jwt client's key

    def counts(self) -> dict[str, int]:
        with urllib.request.urlopen(f"{self.issuer}/counts", timeout=5) as r:
            return json.loads(r.read())


@pytest.fixture
def oauth(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Oauth]:
    """oidc-provider issuing JWT access tokens of ``ttl`` seconds (the test's ``ttl`` mark, default
    20) for the counting server, which refuses a token the second it expires (--auth-leeway 0)."""
    mark = request.node.get_closest_marker("ttl")
    ttl = mark.args[0] if mark else 20
    mcp_port = free_port()
    resource = f"http://127.0.0.1:{mcp_port}/mcp"
    key = ec.generate_private_key(ec.SECP256R1())
    key_file = tmp_path / "client-key.pem"
    key_file.write_bytes(key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()))
    public = json.loads(ECAlgorithm.to_jwk(key.public_key()))
    grant = {"grant_types": ["client_credentials"], "redirect_uris": [], "response_types": []}
    config = {
        "resource": resource,
        "scopes": [SCOPE],
        "ttl": ttl,
        "clients": [
            {"client_id": "swarm", "client_secret": SECRET, "token_endpoint_auth_method": "client_secret_basic", **grant},
            {"client_id": "swarm-jwt", "token_endpoint_auth_method": "private_key_jwt", "jwks": {"keys": [public]}, **grant},
        ],
    }
    server, issuer = start_authserver(config, tmp_path)
    auth = [
        "--auth-jwks",
        f"{issuer}/jwks",
        "--auth-issuer",
        issuer,
        "--resource-url",
        resource,
        "--auth-scopes",
        SCOPE,
        "--auth-leeway",
        "0",
    ]
    try:
        proc, url, countfile = start_counting_server("mcpfast", tmp_path, *auth, port=mcp_port, lifetime=180)
        try:
            yield Oauth(issuer, url, countfile, key_file)
        finally:
            stop(proc)
    finally:
        stop_process(server)


def swarm(tmp: Path, url: str, *args: str, expect: int = 0) -> tuple[Run, Path]:
    """tools_call.py against ``url`` on the counting tool, with ``args``."""
    return locust(tmp, "-f", TOOLS_CALL, "--host", url, "--mcp-tool", "counted", *args, expect=expect)


def _oauth_rows(run: Run) -> tuple[int, int]:
    row = run.stats()[("mcp-http", "oauth:token")]
    return int(row["Request Count"]), int(row["Failure Count"])


@pytest.mark.slow
@pytest.mark.ttl(8)
def test_tokens_replaced_in_flight_through_a_run_of_three_lifetimes(tmp_path: Path, oauth: Oauth) -> None:
    """The native engine (the default) on one token per process, replaced in flight."""
    run, html = swarm(
        tmp_path,
        oauth.url,
        "--mcp-oauth-client-id",
        "swarm",
        "--mcp-oauth-client-secret",
        SECRET,
        "-t",
        "24s",
    )
    csv = agree(run, html, oauth.countfile)  # 0 failures; every output and the server agree
    tokens, refused = _oauth_rows(run)
    # the first token, then one refresh at 70-85 % of each 8 s lifetime (5.6-6.8 s): 4 or 5 in 24 s
    print(f"24 s, 8 s tokens: {csv[('mcp-http', 'tools/call:counted')]} calls, {tokens} oauth:token, 0 failures")
    assert 4 <= tokens <= 5 and refused == 0, csv
    assert oauth.counts() == {"token": tokens, "token_refused": 0}
    assert csv[("mcp-http", "tools/call:counted")] > 1000


@pytest.mark.ttl(4)
@pytest.mark.parametrize("engine", ENGINES)
def test_private_key_jwt_and_short_tokens(tmp_path: Path, oauth: Oauth, engine: str) -> None:
    run, html = swarm(
        tmp_path,
        oauth.url,
        "--mcp-engine",
        engine,
        "--mcp-oauth-client-id",
        "swarm-jwt",
        "--mcp-oauth-private-key",
        str(oauth.key),
        "--mcp-oauth-scope",
        SCOPE,
        "-t",
        "10s",
    )
    agree(run, html, oauth.countfile)
    tokens, refused = _oauth_rows(run)
    # a 4 s token is refreshed 2 s before it expires: one every 2 s, the first at the start
    assert 5 <= tokens <= 7 and refused == 0
    assert oauth.counts() == {"token": tokens, "token_refused": 0}


def test_a_refused_client_stops_the_run_before_any_load(tmp_path: Path, oauth: Oauth) -> None:
    run, _ = swarm(
        tmp_path,
        oauth.url,
        "--mcp-oauth-client-id",
        "swarm",
        "--mcp-oauth-client-secret",
        "not-the-secret",
        expect=2,
    )
    assert "token endpoint refused the client: http 401 invalid_client" in run.output, run.output[-3000:]
    assert oauth.countfile.stat().st_size == 0
    assert oauth.counts() == {"token": 0, "token_refused": 1}


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["--mcp-oauth-client-id", "swarm"], "needs one of --mcp-oauth-client-secret and --mcp-oauth-private-key"),
        (["--mcp-oauth-client-secret", "x"], "need --mcp-oauth-client-id"),
        (["--mcp-oauth-client-id", "swarm", "--mcp-oauth-client-secret", "x", "--mcp-token", "t"], "OAuth client credentials and a token"),
    ],
)
def test_bad_oauth_options_are_refused_before_any_load(tmp_path: Path, args: list[str], reason: str) -> None:
    run, _ = swarm(tmp_path, "http://127.0.0.1:9/mcp", *args, expect=2)
    assert reason in run.output, run.output[-3000:]


def test_a_private_key_that_is_no_key_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.pem"
    bad.write_text("-----BEGIN PRIVATE KEY-----\nnot base64\n-----END PRIVATE KEY-----\n")
    args = ["--mcp-oauth-client-id", "swarm", "--mcp-oauth-private-key", str(bad)]
    run, _ = swarm(tmp_path, "http://127.0.0.1:9/mcp", *args, expect=2)
    assert f"--mcp-oauth-private-key {bad}:" in run.output, run.output[-3000:]


def test_the_authorization_server_is_the_pinned_one() -> None:
    lock = json.loads((AUTHSERVER / "package-lock.json").read_text())
    assert lock["packages"]["node_modules/oidc-provider"]["version"] == "9.13.3"
    out = subprocess.run(
        [authserver_node(), "-e", "console.log(require('./node_modules/oidc-provider/package.json').version)"],
        cwd=AUTHSERVER,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.stdout.strip() == "9.13.3", out.stderr
