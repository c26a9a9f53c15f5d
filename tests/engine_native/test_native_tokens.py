"""Bearer tokens replaced while the native engine runs (``set_bearer_tokens``: a refreshed OAuth
token), against ``mcpfast serve --auth-jwks`` with tokens minted by ``mcpfast token``: calls with
a token the server refuses fail with its reason, calls after the replacement succeed, and the
server's count is the engine's count of successes."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from mcpfast import core

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
from _support import free_port, start_process, stop_process  # noqa: E402
from test_native_engine import APP, env  # noqa: E402

pytestmark = pytest.mark.skipif(not core.HAS_NATIVE_ENGINE, reason="the native engine needs the compiled core")
ISSUER = "https://as.example.test"


def _mcpfast(*args: str) -> str:
    out = subprocess.run([sys.executable, "-m", "mcpfast", *args], capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.strip()


@pytest.fixture
def auth_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """``mcpfast serve`` trusting one signing key: (url, mint(ttl) -> token, count file)."""
    count = tmp_path / "count"
    for k, v in env(count).items():
        monkeypatch.setenv(k, v)
    key, jwks = tmp_path / "key.pem", tmp_path / "jwks.json"
    _mcpfast("token", "--new-key", str(key), "--jwks", str(jwks))
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    argv = [sys.executable, "-m", "mcpfast", "serve", "--transport", "http", "--host", "127.0.0.1", "--port", str(port), "--app", APP]
    argv += ["--auth-jwks", str(jwks), "--auth-issuer", ISSUER, "--resource-url", url]
    proc = start_process(argv, port, "mcpfast serve with auth")

    def mint() -> str:
        return _mcpfast("token", "--key", str(key), "--issuer", ISSUER, "--audience", url, "--ttl", "300")

    yield url, mint, count
    stop_process(proc)


def test_a_replaced_token_is_sent_from_the_next_request_on(auth_server) -> None:
    url, mint, count = auth_server
    eng = core.native_engine(core.EngineConfig(url=url, tool="echo", arguments={"text": "hi"}, bearer_tokens=["not-a-jwt"]))
    eng.start()
    eng.set_users(2)
    rows: list[Any] = []
    time.sleep(1.0)
    rows += eng.drain()
    refused = {reason for r in rows for reason, _ in r.errors}
    assert refused == {"http 401 invalid_token"}, rows
    assert not count.exists() or count.stat().st_size == 0
    eng.set_bearer_tokens([mint()])
    time.sleep(1.0)
    settling = eng.drain()  # refusals of requests sent before the swap may still be in here
    time.sleep(1.0)
    eng.stop(2.0)
    after = eng.drain()
    ok = sum(r.num_requests - r.num_failures for r in settling + after if r.name == "tools/call:echo")
    assert ok > 50, after
    # every success after the swap reached the app; no call before it did
    assert count.stat().st_size == ok
    # a second after the swap, every request carries the new token
    assert sum(r.num_failures for r in after) == 0 and sum(r.num_requests for r in after if r.name == "tools/call:echo") > 20, after


def test_bad_replacements_are_refused(auth_server) -> None:
    url, _, _ = auth_server
    eng = core.native_engine(core.EngineConfig(url=url, tool="echo", arguments={}, bearer_tokens=["a"]))
    for bad, reason in (([], "at least one"), (["a b"], "token 1"), (["ok", ""], "token 2"), (["x\r\ny"], "token 1")):
        with pytest.raises(ValueError, match=reason):
            eng.set_bearer_tokens(bad)
    own = core.native_engine(core.EngineConfig(url=url, tool="echo", arguments={}, headers={"Authorization": "Basic eA=="}))
    with pytest.raises(ValueError, match="its own Authorization header"):
        own.set_bearer_tokens(["t"])
    eng.stop(0.1)
    own.stop(0.1)
