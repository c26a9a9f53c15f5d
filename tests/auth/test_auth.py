"""OAuth 2.1 resource server: metadata, challenges, token checks, sessions bound to the subject."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from mcpfast import cli
from mcpfast.auth import ResourceServer
from mcpfast.auth.tokens import mint_token, new_key
from mcpfast.server.demo import app as demo
from mcpfast.transports.http import HttpTransport, asgi_app

pytestmark = [pytest.mark.timeout(30)]

RESOURCE = "http://127.0.0.1:8000/mcp"
ISSUER = "https://as.example.test"
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    d = tmp_path_factory.mktemp("keys")
    new_key(d / "key.pem", d / "jwks.json")
    new_key(d / "other.pem", d / "other.json")
    return d / "key.pem", d / "jwks.json", d / "other.pem"


def token(key: Path, **overrides: Any) -> str:
    args: dict[str, Any] = {"issuer": ISSUER, "audience": RESOURCE, "subject": "alice", "scope": "mcp:read mcp:write", "ttl": 300}
    args.update(overrides)
    return mint_token(key, **args)


@pytest.fixture
async def protected(keys: tuple[Path, Path, Path]) -> AsyncIterator[tuple[httpx.AsyncClient, HttpTransport]]:
    rs = ResourceServer(str(keys[1]), RESOURCE, issuer=ISSUER, scopes=["mcp:read", "mcp:write"], leeway=5)
    t = asgi_app(demo, auth=rs)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(t), base_url="http://127.0.0.1:8000") as c:
        yield c, t
    await t.aclose()
    assert not t.sessions


@pytest.mark.anyio
async def test_metadata_both_forms(protected: tuple[httpx.AsyncClient, HttpTransport]) -> None:
    c, _ = protected
    for path in ("/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"):
        r = await c.get(path)
        assert r.status_code == 200
        meta = r.json()
        assert meta["resource"] == RESOURCE and meta["authorization_servers"] == [ISSUER]
        assert meta["scopes_supported"] == ["mcp:read", "mcp:write"]
    assert (await c.get("/.well-known/oauth-protected-resource/other")).status_code == 404


@pytest.mark.anyio
async def test_rejected_tokens(protected: tuple[httpx.AsyncClient, HttpTransport], keys: tuple[Path, Path, Path]) -> None:
    c, t = protected
    key, _, other = keys
    challenge = 'resource_metadata="http://127.0.0.1:8000/.well-known/oauth-protected-resource/mcp"'
    r = await c.post("/mcp", json=INIT, headers=HEADERS)
    assert r.status_code == 401
    assert r.headers["www-authenticate"].startswith("Bearer ") and challenge in r.headers["www-authenticate"]
    assert 'scope="mcp:read mcp:write"' in r.headers["www-authenticate"]
    bad = {
        "expired": token(key, now=time.time() - 1000, ttl=60),
        "wrong audience": token(key, audience="http://127.0.0.1:9999/mcp"),
        "wrong issuer": token(key, issuer="https://evil.test"),
        "foreign key": token(other),
        "garbage": "abc.def.ghi",
    }
    for why, tok in bad.items():
        r = await c.post("/mcp", json=INIT, headers={**HEADERS, "Authorization": f"Bearer {tok}"})
        assert r.status_code == 401, why
        assert 'error="invalid_token"' in r.headers["www-authenticate"] and challenge in r.headers["www-authenticate"]
    r = await c.post("/mcp", json=INIT, headers={**HEADERS, "Authorization": "Basic abc"})
    assert r.status_code == 401
    r = await c.post("/mcp", json=INIT, headers={**HEADERS, "Authorization": f"Bearer {token(key, scope='mcp:read')}"})
    assert r.status_code == 403
    www = r.headers["www-authenticate"]
    assert 'error="insufficient_scope"' in www and 'scope="mcp:read mcp:write"' in www and challenge in www
    assert not t.sessions


@pytest.mark.anyio
async def test_session_bound_to_subject(protected: tuple[httpx.AsyncClient, HttpTransport], keys: tuple[Path, Path, Path]) -> None:
    c, t = protected
    alice = {**HEADERS, "Authorization": f"Bearer {token(keys[0])}"}
    bob = {**HEADERS, "Authorization": f"Bearer {token(keys[0], subject='bob')}"}
    r = await c.post("/mcp", json=INIT, headers=alice)
    assert r.status_code == 200
    sid = r.headers["mcp-session-id"]
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    assert (await c.post("/mcp", json=ping, headers={**alice, "Mcp-Session-Id": sid})).status_code == 200
    assert (await c.post("/mcp", json=ping, headers={**bob, "Mcp-Session-Id": sid})).status_code == 404
    assert (await c.delete("/mcp", headers={**bob, "Mcp-Session-Id": sid})).status_code == 404
    assert (await c.delete("/mcp", headers={**alice, "Mcp-Session-Id": sid})).status_code == 200
    assert not t.sessions


def test_token_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key, jwks = tmp_path / "k.pem", tmp_path / "k.json"
    assert cli.main(["token", "--new-key", str(key), "--jwks", str(jwks)]) == 0
    assert key.stat().st_mode & 0o077 == 0
    assert json.loads(jwks.read_text())["keys"][0]["alg"] == "ES256"
    capsys.readouterr()
    args = ["token", "--key", str(key), "--issuer", ISSUER, "--audience", RESOURCE, "--scope", "a b", "--subject", "u", "--ttl", "60"]
    assert cli.main(args) == 0
    tok = capsys.readouterr().out.strip()
    import jwt

    claims = jwt.decode(tok, options={"verify_signature": False})
    assert claims["aud"] == RESOURCE and claims["scope"] == "a b" and claims["sub"] == "u" and claims["exp"] - claims["iat"] == 60


@pytest.mark.anyio
async def test_jwks_url_fetched_once_and_cached(keys: tuple[Path, Path, Path]) -> None:
    import http.server
    import threading

    body = keys[1].read_bytes()
    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # stdlib name
            hits.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/jwks.json"
        rs = ResourceServer(url, RESOURCE, issuer=ISSUER, jwks_ttl=60)
        for subject in ("a", "b", "c"):
            principal = await rs.check(f"Bearer {token(keys[0], subject=subject)}".encode())
            assert not isinstance(principal, tuple) and principal.subject == subject
        assert hits == ["/jwks.json"]
        with pytest.raises(ValueError):
            ResourceServer("http://example.com/jwks.json", RESOURCE)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_serve_http_needs_resource_url_with_jwks(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["serve", "--transport", "http", "--auth-jwks", "x.json"]) == 2
    assert "--resource-url" in capsys.readouterr().err
