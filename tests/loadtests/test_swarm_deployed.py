"""The swarm against servers as users deploy them: HTTPS on ``mcpfast serve --tls-*`` and behind
haproxy (the TLS terminator, an API-key check, a bearer-token check and mTLS), on both engines
with the same options; every output of a run agrees with the server's own count of calls. Bad
options are refused before any load, with exit code 2 and the reason."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from _loadtest_support import LOADTESTS, Run, all_counts, child_env, start_counting_server, stop
from _support import free_port, private_ca, start_haproxy, stop_process

from mcpfast.locust.options import native_available

needs_native = pytest.mark.skipif(not native_available(), reason="mcpfast._core has no NativeEngine (not built)")
ENGINES = ["python", pytest.param("native", marks=needs_native)]
TOOLS_CALL = str(Path(LOADTESTS) / "tools_call.py")
HANDSHAKE = str(Path(LOADTESTS) / "handshake.py")
BASE = ["--headless", "--only-summary", "--stop-timeout", "3", "-u", "4", "-r", "4", "-t", "2s"]


def locust(tmp: Path, *args: str, name: str = "r", expect: int = 0) -> tuple[Run, Path]:
    prefix, html = tmp / name, tmp / f"{name}.html"
    cmd = [sys.executable, "-m", "locust", *BASE, "--csv", str(prefix), "--html", str(html), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=90, env=child_env(), cwd=tmp)
    assert proc.returncode == expect, (proc.stdout + proc.stderr)[-5000:]
    return Run(prefix, proc), html


def agree(run: Run, html: Path, countfile: Path) -> dict[tuple[str, str], int]:
    """Every output counts the same requests, none failed, and the server answered every call."""
    counts = all_counts(run, html)
    csv = counts["csv"]
    for source, got in counts.items():
        assert got == csv, (source, got, csv)
    assert not run.failures(), (run.failures(), run.errors())
    calls = csv.get(("mcp-http", "tools/call:counted"), 0)
    assert calls > 0 and countfile.stat().st_size == calls, (countfile.stat().st_size, csv)
    return csv


@pytest.fixture
def tls_server(tmp_path: Path):
    """The counting server over its own TLS: (https URL, count file, pki)."""
    pki = private_ca(tmp_path / "pki")
    proc, url, countfile = start_counting_server("mcpfast", tmp_path, "--tls-cert", str(pki.cert), "--tls-key", str(pki.key))
    yield url.replace("http://", "https://"), countfile, pki
    stop(proc)


@pytest.mark.parametrize("engine", ENGINES)
def test_ipv6(tmp_path: Path, engine: str) -> None:
    """An IPv6 literal URL (the server on ::1): the same calls, the same count."""
    proc, url, countfile = start_counting_server("mcpfast", tmp_path, "--allowed-host", "[::1]:*", host="::1")
    try:
        assert url.startswith("http://[::1]:")
        run, html = locust(tmp_path, "-f", TOOLS_CALL, "--host", url, "--mcp-tool", "counted", "--mcp-engine", engine)
        agree(run, html, countfile)
    finally:
        stop(proc)


@pytest.mark.parametrize("engine", ENGINES)
def test_https_with_a_private_ca(tmp_path: Path, tls_server, engine: str) -> None:
    url, countfile, pki = tls_server
    run, html = locust(
        tmp_path, "-f", TOOLS_CALL, "--host", url, "--mcp-tool", "counted", "--mcp-engine", engine, "--mcp-ca-file", str(pki.ca)
    )
    csv = agree(run, html, countfile)
    assert run.histograms()["tls_verification"] == "on"
    if engine == "native":
        # four users, one kept-alive connection each: the openings are their own rows
        assert csv[("mcp-http", "tls:handshake")] == csv[("mcp-http", "connect")] == 4


@pytest.mark.parametrize("engine", ENGINES)
def test_an_untrusted_certificate_fails_every_request_and_the_run(tmp_path: Path, tls_server, engine: str) -> None:
    url, countfile, _ = tls_server
    run, _ = locust(tmp_path, "-f", TOOLS_CALL, "--host", url, "--mcp-tool", "counted", "--mcp-engine", engine, expect=1)
    failures = run.failures()
    assert failures and countfile.stat().st_size == 0
    assert ("mcp-http", "tools/call:counted") not in {
        k for k, _ in run.stats().items() if int(_["Request Count"]) > int(_["Failure Count"])
    }
    # both engines name the cause the same way
    assert "initialize: ConnectionFailure('tls handshake failed: certificate from an unknown issuer')" in run.output or (
        "initialize: tls handshake failed: certificate from an unknown issuer" in run.output
    ), run.output[-3000:]


@pytest.mark.parametrize("engine", ENGINES)
def test_insecure_is_said_in_the_log_and_the_summary(tmp_path: Path, tls_server, engine: str) -> None:
    url, countfile, _ = tls_server
    run, html = locust(tmp_path, "-f", TOOLS_CALL, "--host", url, "--mcp-tool", "counted", "--mcp-engine", engine, "--mcp-insecure")
    agree(run, html, countfile)
    assert run.histograms()["tls_verification"].startswith("off")
    assert "WARNING/mcpfast.locust.stats: mcpfast: TLS without verification" in run.output


@pytest.fixture
def behind_haproxy(tmp_path: Path):
    """The plain counting server behind haproxy: TLS on one port (x-api-key required), mTLS on
    another (a client certificate signed by the CA required, tokens t1/t2 checked)."""
    pki = private_ca(tmp_path / "pki", names=("mcp.example.test", "localhost", "127.0.0.1"))
    bundle = tmp_path / "pki" / "haproxy.pem"
    bundle.write_bytes(pki.cert.read_bytes() + pki.key.read_bytes())
    proc, url, countfile = start_counting_server(
        "mcpfast", tmp_path, "--allowed-host", "mcp.example.test:*", "--allowed-host", "127.0.0.1:*"
    )
    backend = url.split("//")[1].split("/")[0]
    api, mtls = free_port(), free_port()
    haproxy = start_haproxy(
        tmp_path / "haproxy",
        f"""frontend api
    bind 127.0.0.1:{api} ssl crt {bundle} alpn http/1.1
    http-request deny deny_status 401 unless {{ req.hdr(x-api-key) -m str k-123 }}
    default_backend mcp

frontend mtls
    bind 127.0.0.1:{mtls} ssl crt {bundle} ca-file {pki.ca} verify required alpn http/1.1
    http-request deny deny_status 401 unless {{ req.hdr(authorization) -m reg ^Bearer\\ t[12]$ }}
    default_backend mcp

backend mcp
    server s1 {backend}
""",
        api,
    )
    yield api, mtls, countfile, pki
    stop_process(haproxy)
    stop(proc)


@pytest.mark.parametrize("engine", ENGINES)
def test_an_api_key_header_through_haproxy(tmp_path: Path, behind_haproxy, engine: str) -> None:
    api, _, countfile, pki = behind_haproxy
    url = f"https://mcp.example.test:{api}/mcp"
    common = ["-f", TOOLS_CALL, "--host", url, "--mcp-tool", "counted", "--mcp-engine", engine, "--mcp-ca-file", str(pki.ca)]
    common += ["--mcp-connect-to", f"mcp.example.test:{api}:127.0.0.1:{api}"]  # the name resolves nowhere
    run, html = locust(tmp_path, *common, "--mcp-header", "x-api-key: k-123")
    agree(run, html, countfile)
    before = countfile.stat().st_size
    run, _ = locust(tmp_path, *common, "--mcp-header", "x-api-key: wrong", name="refused", expect=1)
    assert countfile.stat().st_size == before
    assert run.failures() and "401" in run.output


@pytest.mark.parametrize("engine", ENGINES)
def test_mtls_and_a_token_file_through_haproxy(tmp_path: Path, behind_haproxy, engine: str) -> None:
    _, mtls, countfile, pki = behind_haproxy
    tokens = tmp_path / "tokens"
    tokens.write_text("t1\nt2\n")
    url = f"https://127.0.0.1:{mtls}/mcp"
    common = ["-f", TOOLS_CALL, "--host", url, "--mcp-tool", "counted", "--mcp-engine", engine, "--mcp-ca-file", str(pki.ca)]
    run, html = locust(
        tmp_path,
        *common,
        "--mcp-client-cert",
        str(pki.client_cert),
        "--mcp-client-key",
        str(pki.client_key),
        "--mcp-token-file",
        str(tokens),
    )
    agree(run, html, countfile)
    # without the client certificate haproxy ends the handshake: failures, nothing answered
    before = countfile.stat().st_size
    run, _ = locust(tmp_path, *common, "--mcp-token-file", str(tokens), name="nocert", expect=1)
    assert run.failures() and countfile.stat().st_size == before


@pytest.mark.parametrize("engine", ENGINES)
def test_the_users_take_the_tokens_in_turn(tmp_path: Path, behind_haproxy, engine: str) -> None:
    _, mtls, countfile, pki = behind_haproxy
    tokens = tmp_path / "tokens"
    tokens.write_text("t1\nrevoked\n")  # the second user's token is refused, the first's is not
    url = f"https://127.0.0.1:{mtls}/mcp"
    args = [
        "-f",
        TOOLS_CALL,
        "--host",
        url,
        "--mcp-tool",
        "counted",
        "--mcp-engine",
        engine,
        "--mcp-ca-file",
        str(pki.ca),
        "-u",
        "2",
        "-r",
        "2",
    ]
    args += ["--mcp-client-cert", str(pki.client_cert), "--mcp-client-key", str(pki.client_key), "--mcp-token-file", str(tokens)]
    run, _ = locust(tmp_path, *args, expect=1)
    stats = run.stats()
    assert int(stats[("mcp-http", "initialize")]["Failure Count"]) > 0 and "401" in run.output
    calls = stats[("mcp-http", "tools/call:counted")]
    assert int(calls["Failure Count"]) == 0 and int(calls["Request Count"]) == countfile.stat().st_size > 0


@pytest.mark.parametrize("family", ["handshake", "session_churn"])
@pytest.mark.parametrize("engine", ENGINES)
def test_a_new_connection_per_session_over_tls(tmp_path: Path, tls_server, engine: str, family: str) -> None:
    url, _, pki = tls_server
    locustfile = str(Path(LOADTESTS) / f"{family}.py")
    run, html = locust(
        tmp_path, "-f", locustfile, "--host", url, "--mcp-engine", engine, "--mcp-ca-file", str(pki.ca), "--mcp-new-connection", "session"
    )
    counts = all_counts(run, html)["csv"]
    assert not run.failures(), run.failures()
    sessions = counts[("mcp-http", "initialize")]
    assert sessions > 8
    if engine == "native":
        assert counts[("mcp-http", "tls:handshake")] == counts[("mcp-http", "connect")] == sessions


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--mcp-ca-file", "/nonexistent/ca.pem"], "/nonexistent/ca.pem"),
        (["--mcp-header", "no colon"], "not 'Name: value'"),
        (["--mcp-header", "Host: x"], "set by the client itself"),
        (["--mcp-connect-to", "a:1:b"], "HOST:PORT:ADDR:PORT"),
        (["--mcp-token-file", "{tokens}"], "empty line"),
        (["--mcp-new-connection", "never"], "invalid choice"),
    ],
)
def test_bad_options_are_refused_before_any_load(tmp_path: Path, args: list[str], says: str) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("t1\n\nt2\n")
    args = [a.replace("{tokens}", str(tokens)) for a in args]
    cmd = [sys.executable, "-m", "locust", *BASE, "-f", TOOLS_CALL, "--host", "https://127.0.0.1:9/mcp", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=child_env(), cwd=tmp_path)
    assert proc.returncode == 2, (proc.stdout + proc.stderr)[-3000:]
    assert says in proc.stderr, proc.stderr[-3000:]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_client_key_that_is_not_the_certificates_fails_the_run_before_load(tmp_path: Path, tls_server, engine: str) -> None:
    url, countfile, pki = tls_server
    args = ["-f", TOOLS_CALL, "--host", url, "--mcp-engine", engine, "--mcp-ca-file", str(pki.ca)]
    args += ["--mcp-client-cert", str(pki.client_cert), "--mcp-client-key", str(pki.other_key), "--mcp-tool", "counted"]
    run, _ = locust(tmp_path, *args, expect=2)
    assert countfile.stat().st_size == 0
    assert "client" in run.output and (
        "KEY_VALUES_MISMATCH" in run.output or "InconsistentKeys" in run.output or "key values mismatch" in run.output
    ), run.output[-3000:]


@pytest.fixture
def sticky_replicas(tmp_path: Path):
    """Two ``mcpfast serve`` processes with the memory store (no shared sessions) behind haproxy,
    which pins a client to one of them with a cookie: (URL, the two count files)."""
    procs, backends, counts = [], [], []
    for _ in range(2):
        proc, url, countfile = start_counting_server("mcpfast", tmp_path)
        procs.append(proc)
        backends.append(url.split("//")[1].split("/")[0])
        counts.append(countfile)
    port = free_port()
    servers = "\n".join(f"    server s{i} {b} cookie s{i}" for i, b in enumerate(backends))
    haproxy = start_haproxy(
        tmp_path / "haproxy",
        f"frontend lb\n    bind 127.0.0.1:{port}\n    default_backend mcp\n\n"
        f"backend mcp\n    balance roundrobin\n    option http-server-close\n    cookie SRV insert indirect nocache\n{servers}\n",
        port,
    )
    yield f"http://127.0.0.1:{port}/mcp", counts
    stop_process(haproxy)
    for proc in procs:
        stop(proc)


@pytest.mark.parametrize("engine", ENGINES)
def test_sticky_cookies_keep_each_session_on_its_replica(tmp_path: Path, sticky_replicas, engine: str) -> None:
    url, counts = sticky_replicas
    # a new connection per request: without the cookie, every request may land on either replica
    args = ["-f", TOOLS_CALL, "--host", url, "--mcp-tool", "counted", "--mcp-engine", engine, "--mcp-new-connection", "request"]
    run, html = locust(tmp_path, *args)
    csv = all_counts(run, html)["csv"]
    assert not run.failures(), run.failures()
    calls = csv[("mcp-http", "tools/call:counted")]
    assert calls > 0 and sum(c.stat().st_size for c in counts) == calls
    assert all(c.stat().st_size > 0 for c in counts), "both replicas served users"
    # without the jar the replica that did not open a session answers 404 (session not found)
    run, _ = locust(tmp_path, *args, "--mcp-no-cookie-jar", name="nojar", expect=1)
    failures = run.failures()
    assert failures and "404" in run.output, run.output[-3000:]


@pytest.fixture
def refusing(tmp_path: Path):
    """haproxy refusing every request on two ports: 429 with Retry-After 1, and 401 with a
    Bearer ``invalid_token`` challenge."""
    limited, unauthorized = free_port(), free_port()
    haproxy = start_haproxy(
        tmp_path / "haproxy",
        f"frontend limited\n    bind 127.0.0.1:{limited}\n    http-request deny deny_status 429 hdr Retry-After 1\n\n"
        f"frontend unauthorized\n    bind 127.0.0.1:{unauthorized}\n"
        '    http-request deny deny_status 401 hdr WWW-Authenticate "Bearer error=\\"invalid_token\\""\n',
        limited,
    )
    yield f"http://127.0.0.1:{limited}/mcp", f"http://127.0.0.1:{unauthorized}/mcp"
    stop_process(haproxy)


@pytest.mark.parametrize("engine", ENGINES)
def test_refusals_are_named_by_their_cause_and_retry_after_is_waited(tmp_path: Path, refusing, engine: str) -> None:
    limited, unauthorized = refusing
    common = ["-f", TOOLS_CALL, "--mcp-engine", engine, "-u", "2", "-r", "2"]
    run, _ = locust(tmp_path, *common, "--host", unauthorized, name="u", expect=1)
    assert "http 401 invalid_token" in run.output.lower(), run.output[-3000:]
    run, _ = locust(tmp_path, *common, "--host", limited, name="fast", expect=1)
    assert "http 429 rate limited (retry-after 1 s)" in run.output.lower(), run.output[-3000:]
    hurried = int(run.stats()[("mcp-http", "initialize")]["Failure Count"])
    assert ("mcp-http", "Retry-After wait") not in run.stats()
    run, _ = locust(tmp_path, *common, "--host", limited, "--mcp-retry-after", name="patient", expect=1)
    stats = run.stats()
    waits = stats[("mcp-http", "Retry-After wait")]
    refused = int(stats[("mcp-http", "initialize")]["Failure Count"])
    # each user waits 1 s after each refusal: about 2 users x 2 s, far fewer than without the waits
    assert 2 <= refused <= 8 and refused < hurried / 2, (refused, hurried)
    assert int(waits["Failure Count"]) == 0 and int(waits["Request Count"]) >= refused - 2
    assert float(waits["Median Response Time"]) >= 900
