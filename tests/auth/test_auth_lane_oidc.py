"""The lane's bearer tokens issued by a real authorization server (node ``oidc-provider``,
pinned in tests/authserver, ``make authserver-install``): client-credentials JWT access tokens
that the resource server verifies against the issuer's JWKS, then the lane admits by a lookup
until they expire. The app is served with the lane and without it; every answer must be the
same bytes on both (the ``date`` line aside, and the header fields' order of the lane's 200s).
"""

from __future__ import annotations

import base64
import json
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from _support import start_authserver, stop_process
from test_auth_lane import Pair, Served, app, calls, fields_sorted, open_session

from mcpfast import core
from mcpfast.auth import ResourceServer
from mcpfast.transports.http import asgi_app
from mcpfast.transports.http_testing import serve_in_thread

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(not core.HAS_LANE, reason="the lane is part of the compiled core; the pure-Python core has none"),
]

RESOURCE = "http://127.0.0.1/mcp"
SCOPE = "mcp:tools"
SECRET = "lane-secret-0123456789-abcdefghij"
TTL = 3


@pytest.fixture
def issuer(tmp_path: Path) -> Iterator[str]:
    """oidc-provider issuing ``TTL``-second JWT access tokens for ``RESOURCE`` to client ``lane``."""
    grant = {"grant_types": ["client_credentials"], "redirect_uris": [], "response_types": []}
    config = {
        "resource": RESOURCE,
        "scopes": [SCOPE],
        "ttl": TTL,
        "clients": [{"client_id": "lane", "client_secret": SECRET, "token_endpoint_auth_method": "client_secret_basic", **grant}],
    }
    server, url = start_authserver(config, tmp_path)
    try:
        yield url
    finally:
        stop_process(server)


def access_token(issuer: str) -> tuple[str, int]:
    """A client-credentials access token for ``RESOURCE`` and its ``exp``."""
    form = urllib.parse.urlencode({"grant_type": "client_credentials", "scope": SCOPE, "resource": RESOURCE}).encode()
    basic = base64.b64encode(f"lane:{SECRET}".encode()).decode()
    request = urllib.request.Request(f"{issuer}/token", data=form, headers={"Authorization": f"Basic {basic}"})
    with urllib.request.urlopen(request, timeout=10) as resp:  # 127.0.0.1 only
        token = json.loads(resp.read())["access_token"]
    claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    assert claims["aud"] == RESOURCE and claims["iss"] == issuer, claims
    return token, int(claims["exp"])


def test_tokens_of_a_real_authorization_server_on_the_lane(issuer: str) -> None:
    def transport() -> object:
        return asgi_app(app, auth=ResourceServer(f"{issuer}/jwks", RESOURCE, issuer=issuer, scopes=[SCOPE], leeway=0))

    with_lane, without = transport(), transport()
    with serve_in_thread(with_lane) as a, serve_in_thread(without, lane=False) as b:
        pair = Pair(Served(with_lane, a), Served(without, b), None)  # type: ignore[arg-type]
        token, exp = access_token(issuer)
        auth = f"Bearer {token}"
        sids = (open_session(pair.lane, auth), open_session(pair.full, auth))
        got, answered = calls(pair.lane, auth, sids[0], 5)
        want, _ = calls(pair.full, auth, sids[1], 5)
        assert answered == 5  # verified once, at the initialize: every call the lane's
        assert fields_sorted(got) == fields_sorted(want)
        assert all(g.startswith(b"HTTP/1.1 200") for g in got)
        while time.time() < exp + 0.05:  # the issuer's expiry: the lane admits it no more
            time.sleep(0.05)
        got, answered = calls(pair.lane, auth, sids[0], 2)
        want, _ = calls(pair.full, auth, sids[1], 2)
        assert answered == 0
        assert got == want
        assert got[0].startswith(b"HTTP/1.1 401") and b'error_description="token expired"' in got[0], got[0]
        # a new token of the same client: verified once more, then the lane's again
        fresh = f"Bearer {access_token(issuer)[0]}"
        got, answered = calls(pair.lane, fresh, sids[0], 3)
        assert [g.split(b" ", 2)[1] for g in got] == [b"200"] * 3
        assert answered == 2
