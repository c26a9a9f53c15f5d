"""The native engine over TLS, against ``mcpfast serve --tls-cert/--tls-key`` with a private CA
made here: calls counted against the server's own count, the ``connect`` and ``tls:handshake``
rows equal to the connections made, and every way verification can fail (unknown issuer,
expired, wrong name, a server that hangs up mid-handshake) a failure with its reason, never a
success. Bad files are refused when the engine is built, before any load."""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from mcpfast import core

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
from _support import free_port, private_ca, start_process, stop_process  # noqa: E402
from test_native_engine import APP, env, run  # noqa: E402

pytestmark = pytest.mark.skipif(not core.HAS_NATIVE_ENGINE, reason="the native engine needs the compiled core")


@pytest.fixture
def tls_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """``mcpfast serve`` over TLS with the counting app: (port, pki, count file)."""
    count = tmp_path / "count"
    for k, v in env(count).items():
        monkeypatch.setenv(k, v)
    pki = private_ca(tmp_path / "pki", names=("localhost", "127.0.0.1", "mcp.example.test"))
    port = free_port()
    argv = [sys.executable, "-m", "mcpfast", "serve", "--transport", "http", "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--app", APP, "--tls-cert", str(pki.cert), "--tls-key", str(pki.key), "--allowed-host", "localhost:*"]
    argv += ["--allowed-host", "127.0.0.1:*", "--allowed-host", "mcp.example.test:*"]
    proc = start_process(argv, port, "mcpfast serve over TLS")
    yield port, pki, count
    stop_process(proc)


def _reasons(rows: list[Any], name: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in rows:
        if r.name == name:
            for reason, n in r.errors:
                out[reason] = out.get(reason, 0) + n
    return out


def _config(url: str, **extra: Any) -> dict[str, Any]:
    """``EngineConfig``'s keyword arguments for calls of echo to ``url``."""
    return {"url": url, "tool": "echo", "arguments": {"text": "hi"}, **extra}


def test_calls_over_tls_equal_the_servers_count(tls_server) -> None:
    port, pki, count = tls_server
    eng, totals, _rows = run(_config(f"https://localhost:{port}/mcp", ca_files=[str(pki.ca)]), 4, 1.5)
    calls, failures, _ = totals["tools/call:echo"]
    assert failures == 0 and calls > 50
    assert calls == count.stat().st_size
    status = eng.status()
    # one kept-alive connection per user: four connects, four handshakes, none inside a request
    assert status["connects"] == 4
    assert totals["connect"][:2] == [4, 0] and totals["tls:handshake"][:2] == [4, 0]
    # the opening of a connection is not a request: completed counts the requests only
    assert status["completed"] == sum(t[0] for n, t in totals.items() if n not in ("connect", "tls:handshake"))


def test_a_new_connection_per_session_has_a_handshake_row_each(tls_server) -> None:
    port, pki, _ = tls_server
    cfg = _config(f"https://127.0.0.1:{port}/mcp", ca_files=[str(pki.ca)], family="handshake", new_connection="session")
    eng, totals, _ = run(cfg, 2, 1.5)
    sessions = totals["initialize"][0]
    assert sessions > 10 and totals["initialize"][1] == 0
    assert totals["tls:handshake"][:2] == [sessions, 0] == [eng.status()["connects"], 0]
    assert totals["connect"][0] == sessions


def test_a_new_connection_per_request(tls_server) -> None:
    port, pki, count = tls_server
    eng, totals, _ = run(_config(f"https://127.0.0.1:{port}/mcp", ca_files=[str(pki.ca)], new_connection="request"), 2, 1.0)
    calls = totals["tools/call:echo"][0]
    requests = sum(t[0] for n, t in totals.items() if n not in ("connect", "tls:handshake"))
    assert calls > 10 and totals["tools/call:echo"][1] == 0 and calls == count.stat().st_size
    assert totals["tls:handshake"][0] == eng.status()["connects"] == requests


def test_connect_to_keeps_the_urls_name_for_tls(tls_server) -> None:
    port, pki, count = tls_server
    # the URL's host resolves nowhere: the connection goes where connect_to says, SNI and Host stay the URL's
    cfg = _config(f"https://mcp.example.test:{port}/mcp", ca_files=[str(pki.ca)], connect_to=[f"mcp.example.test:{port}:127.0.0.1:{port}"])
    _, totals, _ = run(cfg, 2, 1.0)
    assert totals["tools/call:echo"][1] == 0 and totals["tools/call:echo"][0] == count.stat().st_size > 0


def test_insecure_accepts_the_unknown_ca_and_says_so(tls_server) -> None:
    port, _, count = tls_server
    eng = core.native_engine(core.EngineConfig(**_config(f"https://127.0.0.1:{port}/mcp", insecure=True)))
    assert ("tls_insecure", "TLS without verification: any server certificate is accepted") in eng.events()
    _, totals, _ = run(_config(f"https://127.0.0.1:{port}/mcp", insecure=True), 2, 1.0)
    assert totals["tools/call:echo"][1] == 0 and totals["tools/call:echo"][0] == count.stat().st_size > 0


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("unknown issuer", "certificate from an unknown issuer"),
        ("wrong name", "certificate not valid for name 127.0.0.1"),
        ("expired", "certificate expired"),
    ],
)
def test_verification_failures_are_failures_with_their_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str, reason: str
) -> None:
    count = tmp_path / "count"
    for k, v in env(count).items():
        monkeypatch.setenv(k, v)
    pki = private_ca(tmp_path / "pki", names=("mcp.other.test",) if case == "wrong name" else ("127.0.0.1",), expired=case == "expired")
    port = free_port()
    argv = [sys.executable, "-m", "mcpfast", "serve", "--transport", "http", "--host", "127.0.0.1", "--port", str(port)]
    proc = start_process([*argv, "--app", APP, "--tls-cert", str(pki.cert), "--tls-key", str(pki.key)], port)
    try:
        cas = [] if case == "unknown issuer" else [str(pki.ca)]
        eng, totals, rows = run(_config(f"https://127.0.0.1:{port}/mcp", ca_files=cas), 2, 1.0)
    finally:
        stop_process(proc)
    full = f"tls handshake failed: {reason}"
    assert _reasons(rows, "tls:handshake").keys() == {full}
    # the requests that could not be sent fail with the same reason; nothing is a success
    assert _reasons(rows, "initialize").keys() == {full}
    assert totals["initialize"][0] == totals["initialize"][1] == totals["tls:handshake"][1] > 0
    assert ("tools/call:echo" not in totals and not count.exists()) or count.stat().st_size == 0
    assert eng.status()["connects"] == 0


def test_a_server_that_hangs_up_mid_handshake_fails_that_connection_only() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    stop = threading.Event()

    def hang_up() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            conn.recv(1024)  # the ClientHello
            conn.close()

    thread = threading.Thread(target=hang_up, daemon=True)
    thread.start()
    try:
        _eng, totals, rows = run(_config(f"https://127.0.0.1:{port}/mcp", insecure=True), 2, 0.6)
    finally:
        stop.set()
        thread.join(5)
        listener.close()
    reasons = _reasons(rows, "tls:handshake")
    assert reasons and all(r.startswith("tls handshake failed") for r in reasons), reasons
    assert totals["connect"][1] == 0 and totals["connect"][0] == totals["tls:handshake"][0] == totals["tls:handshake"][1]
    assert totals["initialize"][0] == totals["initialize"][1] > 0


def test_bad_tls_files_are_refused_when_the_engine_is_built(tmp_path: Path) -> None:
    pki = private_ca(tmp_path)
    url = "https://127.0.0.1:9/mcp"
    empty = tmp_path / "empty.pem"
    empty.write_text("no certificate here\n")
    cases = [
        ({"ca_files": [str(tmp_path / "missing.pem")]}, "ca_files: " + str(tmp_path / "missing.pem")),
        ({"ca_files": [str(empty)]}, "ca_files: " + str(empty)),
        ({"client_cert": str(pki.client_cert), "client_key": str(pki.other_key)}, "client_cert: "),
        ({"client_cert": str(pki.client_cert), "client_key": str(empty)}, "client_key: "),
        ({"client_cert": str(pki.client_cert)}, "client_cert and client_key go together"),
        ({"connect_to": ["elsewhere:443:127.0.0.1:9"]}, "matches no URL"),
        ({"connect_to": ["127.0.0.1:9:127.0.0.1"]}, "connect_to"),
    ]
    for extra, message in cases:
        with pytest.raises(ValueError, match="engine config") as refused:
            core.native_engine(core.EngineConfig(**_config(url, **extra)))
        assert message in str(refused.value), (extra, str(refused.value))
    # a good pair builds
    core.native_engine(
        core.EngineConfig(**_config(url, ca_files=[str(pki.ca)], client_cert=str(pki.client_cert), client_key=str(pki.client_key)))
    )


def _slow_hello_proxy(upstream: int, delay: float, stop: threading.Event) -> int:
    """A TCP relay to ``upstream`` that holds the server's first bytes (its ServerHello) for
    ``delay`` s on every connection: the handshake is slow, the requests after it are not."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)

    def pipe(src: socket.socket, dst: socket.socket, hold: float) -> None:
        try:
            while data := src.recv(65536):
                if hold:
                    time.sleep(hold)
                    hold = 0.0
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def serve() -> None:
        while not stop.is_set():
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            server = socket.create_connection(("127.0.0.1", upstream))
            threading.Thread(target=pipe, args=(client, server, 0.0), daemon=True).start()
            threading.Thread(target=pipe, args=(server, client, delay), daemon=True).start()
        listener.close()

    threading.Thread(target=serve, daemon=True).start()
    return listener.getsockname()[1]


def test_the_handshake_is_its_own_row_not_part_of_the_first_request(tls_server) -> None:
    port, pki, _ = tls_server
    stop = threading.Event()
    relay = _slow_hello_proxy(port, 0.3, stop)
    try:
        cfg = _config(f"https://127.0.0.1:{relay}/mcp", ca_files=[str(pki.ca)], family="handshake", new_connection="session")
        _, totals, rows = run(cfg, 1, 1.5)
    finally:
        stop.set()
    span = {r.name: (r.min_ms, r.max_ms) for r in rows if r.num_requests}
    assert totals["tls:handshake"][1] == 0 and totals["tls:handshake"][0] >= 2
    assert min(r.min_ms for r in rows if r.name == "tls:handshake") >= 290  # ms: the held ServerHello
    assert max(r.max_ms for r in rows if r.name == "initialize") < 250, span  # the first request of each connection
    assert max(r.max_ms for r in rows if r.name == "connect") < 250


def _load_bin() -> Path:
    """The generator binary, built when missing (``make test-rust`` builds it)."""
    from benchmarks.http_peers import load_binary

    return load_binary()


def test_mcpfast_load_over_tls(tls_server) -> None:
    """The generator takes the swarm's TLS options: with the CA every call counted by the server,
    without it every call refused by name, with --insecure said in the summary."""
    import subprocess

    port, pki, count = tls_server
    url = f"https://localhost:{port}/mcp"
    base = [str(_load_bin()), "calls", "--url", url, "--sessions", "2", "--duration", "1", "--warmup", "0.2", "--tool", "echo"]

    def load(*extra: str) -> tuple[int, dict[str, Any], str]:
        out = subprocess.run([*base, *extra], capture_output=True, text=True, timeout=60)
        lines = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
        return out.returncode, (lines[-1] if lines else {}), out.stderr

    before = count.stat().st_size if count.exists() else 0
    code, summary, err = load("--ca-file", str(pki.ca))
    assert code == 0 and summary["tls_verification"] == "on", err
    assert summary["calls"] > 20 and count.stat().st_size - before >= summary["calls"]
    code, summary, err = load()
    assert code == 1 and "certificate from an unknown issuer" in json.dumps(summary), (summary, err)
    code, summary, err = load("--insecure")
    assert code == 0 and summary["tls_verification"] == "off" and "TLS without verification" in err
    code, _, err = load("--ca-file", "/nonexistent/ca.pem")
    assert code == 2 and "/nonexistent/ca.pem" in err
