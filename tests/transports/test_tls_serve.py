"""``mcpfast serve --tls-cert PEM --tls-key PEM``: HTTPS on the native runner and uvicorn, with
certificates from a private CA made here; bad files are refused before the port is bound."""

from __future__ import annotations

import json
import socket
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from _support import child_env, free_port, private_ca, start_process, stop_process

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "tls", "version": "1"}},
}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _serve(*args: str) -> list[str]:
    return [sys.executable, "-m", "mcpfast", "serve", "--transport", "http", "--host", "127.0.0.1", *args]


def _post(url: str, context: ssl.SSLContext) -> tuple[int, dict[str, object], str | None]:
    request = urllib.request.Request(url, data=json.dumps(INIT).encode(), method="POST", headers=HEADERS)
    with urllib.request.urlopen(request, timeout=10, context=context) as reply:
        return reply.status, json.loads(reply.read()), reply.headers.get("mcp-session-id")


def _verify_error(url: str, context: ssl.SSLContext) -> ssl.SSLCertVerificationError:
    with pytest.raises(urllib.error.URLError) as failed:
        _post(url, context)
    assert isinstance(failed.value.reason, ssl.SSLCertVerificationError), failed.value
    return failed.value.reason


@pytest.mark.parametrize("runner", ["native", "uvicorn"])
def test_https_answers_with_the_certificate_the_client_trusts(tmp_path: Path, runner: str) -> None:
    pki = private_ca(tmp_path)
    port = free_port()
    argv = _serve("--port", str(port), "--runner", runner, "--tls-cert", str(pki.cert), "--tls-key", str(pki.key))
    proc = start_process(argv, port, f"serve --runner {runner} over TLS", env=child_env())
    try:
        trusting = ssl.create_default_context(cafile=str(pki.ca))
        for host in ("127.0.0.1", "localhost"):
            status, body, session = _post(f"https://{host}:{port}/mcp", trusting)
            assert status == 200 and body["id"] == 1 and session
            assert "serverInfo" in body["result"]  # type: ignore[operator]
        # The system store does not know the private CA: the handshake fails, and the server goes on.
        assert "local issuer" in _verify_error(f"https://127.0.0.1:{port}/mcp", ssl.create_default_context()).verify_message
        assert _post(f"https://127.0.0.1:{port}/mcp", trusting)[0] == 200
        # Plain HTTP on the TLS port is not served as a request.
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            raw.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}")
            assert not raw.recv(65536).startswith(b"HTTP/1.1 2")
        context = ssl.create_default_context(cafile=str(pki.ca))
        context.set_alpn_protocols(["h2", "http/1.1"])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, context.wrap_socket(raw, server_hostname="localhost") as tls:
            assert tls.version() in ("TLSv1.2", "TLSv1.3")
            if runner == "native":
                assert tls.selected_alpn_protocol() == "http/1.1"
    finally:
        stop_process(proc)


def test_a_name_the_certificate_does_not_carry_fails_verification(tmp_path: Path) -> None:
    pki = private_ca(tmp_path, names=("mcp.other.test",))
    port = free_port()
    proc = start_process(_serve("--port", str(port), "--tls-cert", str(pki.cert), "--tls-key", str(pki.key)), port, env=child_env())
    try:
        error = _verify_error(f"https://127.0.0.1:{port}/mcp", ssl.create_default_context(cafile=str(pki.ca)))
        assert "mismatch" in error.verify_message or "match" in str(error)
    finally:
        stop_process(proc)


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("mismatched key", "the key does not match the certificate"),
        ("cert alone", "--tls-cert and --tls-key go together"),
        ("missing file", "cannot read"),
        ("not PEM", "not a PEM certificate and key"),
    ],
)
def test_bad_tls_files_are_refused_before_listening(tmp_path: Path, case: str, expected: str) -> None:
    pki = private_ca(tmp_path)
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    args = {
        "mismatched key": ["--tls-cert", str(pki.cert), "--tls-key", str(pki.other_key)],
        "cert alone": ["--tls-cert", str(pki.cert)],
        "missing file": ["--tls-cert", str(tmp_path / "absent.pem"), "--tls-key", str(pki.key)],
        "not PEM": ["--tls-cert", str(junk), "--tls-key", str(pki.key)],
    }[case]
    port = free_port()
    out = subprocess.run(_serve("--port", str(port), *args), capture_output=True, text=True, timeout=60, env=child_env())
    assert out.returncode == 2, out.stderr
    assert expected in out.stderr, out.stderr
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
