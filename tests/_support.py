"""Helpers every test area shares, once: child processes, free ports, waiting for a condition.

A plain module (test folders have no ``__init__.py``; ``tests/`` is on ``sys.path`` because
``tests/conftest.py`` lives there). The process primitives are the benchmarks' own
(:mod:`mcpfast.bench.procs`); this module adds what only tests need:

* :func:`child_env`: a child interpreter's environment (this checkout first, no ``PYTHONWARNINGS``);
* :func:`start_process`: start a server process and wait until it listens on its port;
* :func:`wait_until` / :func:`until`: wait for a condition with a deadline, instead of a fixed
  sleep; the caller asserts what it waited for, so a wait that ran out still fails the test;
* :func:`refused_port`: a port where a connection is refused (not a fixed one such as 9);
* :func:`stdio_start_seconds`: how long a stdio server takes to answer ``initialize`` now (a
  busy machine starts Python processes several times slower: runs sized by it get their calls);
* :func:`metric`: one sample of a server's Prometheus text (``/metrics``);
* :func:`private_ca`: a private CA and a server certificate it signed, as PEM files, for the TLS
  tests (real certificates, made here, trusted by nothing but the test's own clients);
* :func:`locust_master_args`: a Locust master on a free 127.0.0.1 port, not the default 5557
  another suite on this machine may hold;
* :func:`start_reference_server` / :func:`start_http_server` / :func:`stop`: ``mcpfast serve`` or
  one of the test peer servers (``FAKE``, ``SDK``: a scripted fake and the official SDK's) on a
  free port, for every area that needs a live MCP server;
* :class:`RedisServer` (the ``redis`` fixture of ``tests/conftest.py``): a real ``redis-server``
  on a free port.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import select
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from mcpfast.bench import procs
from mcpfast.bench.procs import free_port, stop_process, wait_port

__all__ = [
    "DRIVE",
    "FAKE",
    "REPO_ROOT",
    "SDK",
    "RedisServer",
    "child_env",
    "free_port",
    "locust_master_args",
    "metric",
    "private_ca",
    "refused_port",
    "start_http_server",
    "start_process",
    "start_reference_server",
    "stdio_start_seconds",
    "stop",
    "stop_process",
    "until",
    "wait_port_named",
    "wait_until",
]

REPO_ROOT = Path(__file__).resolve().parent.parent
_CLIENT_TESTS = REPO_ROOT / "tests" / "client"
#: The test peer servers (``_fake_server.py``: scripted replies; ``_sdk_server.py``: the official
#: Python SDK's server) and the client driver the client tests run in a child interpreter.
FAKE = str(_CLIENT_TESTS / "_fake_server.py")
SDK = str(_CLIENT_TESTS / "_sdk_server.py")
DRIVE = str(_CLIENT_TESTS / "_drive.py")

#: How long a test waits for something the server does by itself (a session ending, a cancel
#: arriving, a process listening): generous, since CI machines are busy; a pass returns at once.
WAIT = 15.0


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a child interpreter that imports this checkout's ``mcpfast``
    (:func:`mcpfast.bench.procs.child_env` without the suite's ``PYTHONWARNINGS``), plus ``extra``."""
    env = procs.child_env()
    env.pop("PYTHONWARNINGS", None)
    env.update(extra)
    return env


def start_process(
    cmd: Sequence[str], port: int, what: str | None = None, *, timeout: float = 30.0, host: str = "127.0.0.1", **popen: Any
) -> subprocess.Popen[Any]:
    """``Popen(cmd, **popen)`` (stdout and stderr discarded unless given), then wait until it
    listens on 127.0.0.1:``port``; a process that exits first or never listens is stopped and
    raises ``RuntimeError`` naming ``what``."""
    popen.setdefault("stdout", subprocess.DEVNULL)
    popen.setdefault("stderr", subprocess.DEVNULL)
    proc = subprocess.Popen(list(cmd), **popen)
    try:
        wait_port(port, proc, timeout=timeout, host=host)
    except RuntimeError as exc:
        stop_process(proc)
        raise RuntimeError(f"{what or cmd[0]} did not start: {exc}") from None
    return proc


AUTHSERVER = Path(__file__).resolve().parent / "authserver"
"""The real authorization server of the tests: node ``oidc-provider``, pinned in its package.json."""


def authserver_node() -> str:
    """node, with the authorization server's packages installed (else the test fails, saying how)."""
    node = shutil.which("node")
    if node is None or not (AUTHSERVER / "node_modules" / "oidc-provider" / "package.json").is_file():
        pytest.fail("the authorization server is not installed: run `make authserver-install` (node and npm ci in tests/authserver)")
    return node


def _cpu_seconds(pid: int) -> float | None:
    """The CPU time (user + system, all threads) ``pid`` has used, from /proc; None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _process_state(pid: int) -> str:
    """The ``State:`` line of ``pid`` in /proc (``S (sleeping)``...), or ``gone``."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return "gone"
    return status.split("State:", 1)[1].split("\n", 1)[0].strip() if "State:" in status else "unknown"


AUTHSERVER_STALL = 20.0
"""Seconds without a ready line and with under a tenth of a second of CPU, after which an
authorization server counts as stuck rather than slow."""


def start_authserver(config: dict[str, Any], tmp: Path, *, timeout: float = 120.0) -> tuple[subprocess.Popen[Any], str]:
    """``tests/authserver/server.mjs`` with ``config`` (its port left to the system: no port picked
    beforehand that another test may take meanwhile); ``(process, issuer URL)`` once it listens,
    read from the line it prints then. Its output goes to ``tmp/authserver.log``.

    A busy machine makes node slow to load oidc-provider's hundreds of modules (over 30 s seen),
    so a process that is still using CPU is waited for up to ``timeout``. One that has used almost
    none for :data:`AUTHSERVER_STALL` seconds is stuck (seen twice in full-suite runs, after its
    first warning, cause not found; it starts in 0.3 s otherwise) and is replaced, twice at most;
    each stall is written to ``tmp/authserver-stalls.txt`` and named in the error if none starts."""
    node = authserver_node()
    config_file = tmp / "authserver.json"
    config_file.write_text(json.dumps({**config, "port": 0}))
    deadline = time.monotonic() + timeout
    stalls: list[str] = []
    while True:
        ready = tmp / "authserver.out"
        with open(ready, "wb") as out, open(tmp / "authserver.log", "ab") as log:
            proc = subprocess.Popen([node, str(AUTHSERVER / "server.mjs"), str(config_file)], stdout=out, stderr=log)
        checked, cpu = time.monotonic(), 0.0
        while True:
            line = ready.read_text().partition("\n")
            if line[1]:
                return proc, str(json.loads(line[0])["issuer"])
            now = time.monotonic()
            if proc.poll() is None and now - checked >= AUTHSERVER_STALL:
                used = _cpu_seconds(proc.pid)
                if used is not None and used - cpu < 0.1 and len(stalls) < 2:
                    stalls.append(
                        f"pid {proc.pid}: {used:.2f} s of CPU, {used - cpu:.2f} s in the last {now - checked:.0f} s, "
                        f"state {_process_state(proc.pid)}"
                    )
                    with open(tmp / "authserver-stalls.txt", "a") as fh:
                        fh.write(stalls[-1] + "\n")
                    stop_process(proc)
                    break
                checked, cpu = now, used or cpu
            if proc.poll() is not None or now > deadline:
                why = f"exited with {proc.returncode}" if proc.returncode is not None else f"not listening after {timeout:.0f} s"
                stop_process(proc)
                log_text = (tmp / "authserver.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"oidc-provider {why} (stalls: {stalls or 'none'}): {log_text}")
            time.sleep(0.05)


@contextlib.contextmanager
def native_server_thread(server: Any) -> Iterator[tuple[str, asyncio.AbstractEventLoop]]:
    """``server`` (a ``mcpfast.transports.http_server.HttpServer``) on 127.0.0.1, on a free port,
    in an event loop of its own thread; yields ``(base URL, loop)`` and closes it all after."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(server.start("127.0.0.1", 0))
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(5) and server.bound is not None
    try:
        yield f"http://127.0.0.1:{server.bound[1]}", loop
    finally:
        asyncio.run_coroutine_threadsafe(server.close(grace=1.0), loop).result(5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


def _settled(condition: Callable[[], object], deadline: float) -> bool | None:
    """``True`` when ``condition`` holds, ``False`` when the deadline passed, ``None``: poll again."""
    if condition():
        return True
    return bool(condition()) if time.monotonic() >= deadline else None


def wait_until(condition: Callable[[], object], timeout: float = WAIT, interval: float = 0.02) -> bool:
    """Poll ``condition`` until it is true or ``timeout`` seconds passed; return its last truth.

    ``assert wait_until(lambda: not t.sessions)``: the wait ends as soon as the condition holds,
    and a condition that never holds fails the assertion."""
    deadline = time.monotonic() + timeout
    while (done := _settled(condition, deadline)) is None:
        time.sleep(interval)
    return done


async def until(condition: Callable[[], object], timeout: float = WAIT, interval: float = 0.01) -> bool:
    """:func:`wait_until` inside an event loop (the loop keeps running meanwhile)."""
    deadline = time.monotonic() + timeout
    while (done := _settled(condition, deadline)) is None:
        await asyncio.sleep(interval)
    return done


def locust_master_args() -> list[str]:
    """Locust options for a master (``--master`` or ``--processes N``) of its own: bound to
    127.0.0.1 on a free port, its workers pointed at that port."""
    port = str(free_port())
    return ["--master-bind-host", "127.0.0.1", "--master-bind-port", port, "--master-port", port]


def metric(text: str, name: str, **labels: str) -> float:
    """The value of the sample ``name`` with exactly these label values in Prometheus text (0 when
    absent); without labels, the unlabelled sample."""
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        head, _, value = line.rpartition(" ")
        sample, _, rest = head.partition("{")
        if sample != name:
            continue
        if all(f'{k}="{v}"' in rest for k, v in labels.items()) and (labels or not rest):
            return float(value)
    return 0.0


@contextlib.contextmanager
def refused_port() -> Iterator[int]:
    """A 127.0.0.1 port bound but never listening while the block runs: a connection to it is
    refused, and no other process can start listening there meanwhile."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}},
}


def stdio_start_seconds(argv: Sequence[str], timeout: float = 60.0, **popen: Any) -> float:
    """Seconds from starting the stdio server ``argv`` to its answer to ``initialize`` (the
    process is stopped afterwards). Raises ``RuntimeError`` when no answer comes in ``timeout``."""
    start = time.monotonic()
    proc = subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, **popen)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(json.dumps(_INITIALIZE).encode() + b"\n")
        proc.stdin.flush()
        if not select.select([proc.stdout], [], [], timeout)[0] or not proc.stdout.readline():
            raise RuntimeError(f"{argv[0]} did not answer initialize within {timeout:g} s")
        return time.monotonic() - start
    finally:
        proc.stdin.close()
        stop_process(proc)
        proc.stdout.close()


def start_haproxy(folder: Path, sections: str, port: int) -> subprocess.Popen[Any]:
    """Debian's haproxy in the foreground (``make haproxy-install``) with ``sections`` (frontends
    and backends) after a plain HTTP-mode ``defaults``; returns once ``port`` accepts."""
    cfg = folder / "haproxy.cfg"
    folder.mkdir(parents=True, exist_ok=True)
    cfg.write_text(
        "global\n    maxconn 4000\n\n"
        "defaults\n    mode http\n    timeout connect 5s\n    timeout client 60s\n    timeout server 60s\n\n" + sections
    )
    check = subprocess.run(["haproxy", "-c", "-f", str(cfg)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    return start_process(["haproxy", "-db", "-f", str(cfg)], port, "haproxy")


class Pki(NamedTuple):
    """PEM files of :func:`private_ca`: ``ca`` (the root to trust), ``cert``/``key`` (the server's
    leaf and its key), ``other_key`` (a key of another pair: the mismatch case),
    ``client_cert``/``client_key`` (a client leaf for mTLS, signed by the same CA)."""

    ca: Path
    cert: Path
    key: Path
    other_key: Path
    client_cert: Path
    client_key: Path


def private_ca(folder: Path, names: Sequence[str] = ("localhost", "127.0.0.1", "::1"), *, days: int = 2, expired: bool = False) -> Pki:
    """A CA and a leaf for ``names`` (DNS names and IP addresses) that it signed, written to
    ``folder`` (``expired``: the server's leaf ended yesterday)."""
    import datetime as dt
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    def pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
        return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())

    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mcpfast test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    alt: list[x509.GeneralName] = []
    for name in names:
        try:
            alt.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            alt.append(x509.DNSName(name))

    def leaf(
        subject: str, public: ec.EllipticCurvePublicKey, usage: x509.ObjectIdentifier, start: dt.datetime, end: dt.datetime
    ) -> x509.Certificate:
        return (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(ca_name)
            .public_key(public)
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.SubjectAlternativeName(alt), critical=False)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(ca_key, hashes.SHA256())
        )

    start, end = (now - dt.timedelta(days=2), now - dt.timedelta(days=1)) if expired else (now, now + dt.timedelta(days=days))
    server = leaf(names[0], key.public_key(), ExtendedKeyUsageOID.SERVER_AUTH, start, end)
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = leaf("mcpfast test client", client_key.public_key(), ExtendedKeyUsageOID.CLIENT_AUTH, now, now + dt.timedelta(days=days))
    folder.mkdir(parents=True, exist_ok=True)
    pki = Pki(
        folder / "ca.pem",
        folder / "server.pem",
        folder / "server.key",
        folder / "other.key",
        folder / "client.pem",
        folder / "client.key",
    )
    pki.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    pki.cert.write_bytes(server.public_bytes(serialization.Encoding.PEM))
    pki.client_cert.write_bytes(client.public_bytes(serialization.Encoding.PEM))
    pki.client_key.write_bytes(pem_key(client_key))
    pki.key.write_bytes(pem_key(key))
    pki.other_key.write_bytes(pem_key(ec.generate_private_key(ec.SECP256R1())))
    return pki


def wait_port_named(port: int, proc: subprocess.Popen[Any], what: str, timeout: float = 20.0) -> None:
    """:func:`mcpfast.bench.procs.wait_port`, its error naming ``what``."""
    try:
        wait_port(port, proc, timeout=timeout)
    except RuntimeError as exc:
        raise RuntimeError(f"{what}: {exc}") from None


def start_http_server(script: str, tmp: Path, *args: str, lifetime: float = 90.0) -> tuple[subprocess.Popen[Any], str]:
    """Start a test peer server (``FAKE``, ``SDK``) over HTTP; return (process, endpoint URL)."""
    portfile = tmp / f"port-{time.monotonic_ns()}"
    proc = subprocess.Popen(
        [sys.executable, script, "http", str(portfile), "--lifetime", str(lifetime), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=child_env(),
    )
    deadline = time.monotonic() + 30
    while not (portfile.exists() and portfile.read_text().strip()):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"test server {script} {args} did not start")
        time.sleep(0.05)
    return proc, f"http://127.0.0.1:{int(portfile.read_text())}/mcp"


def stop(proc: subprocess.Popen[Any]) -> None:
    stop_process(proc)


def start_reference_server(*args: str, lifetime: int = 150) -> tuple[subprocess.Popen[Any], str]:
    """``mcpfast serve --transport http`` on a free 127.0.0.1 port (killed by ``timeout`` after
    ``lifetime`` s at the latest); returns (process, ``http://127.0.0.1:PORT/mcp``)."""
    port = free_port()
    serve = [sys.executable, "-m", "mcpfast", "serve", "--transport", "http", "--host", "127.0.0.1", "--port", str(port), *args]
    proc = start_process(["timeout", str(lifetime), *serve], port, "mcpfast serve --transport http", env=child_env())
    return proc, f"http://127.0.0.1:{port}/mcp"


class RedisServer:
    """One ``redis-server`` process (``stop``/``start`` keep the port: a restart comes back empty)."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.workdir = workdir
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (make test installs Debian's redis-server)")
        argv = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        argv += ["--dir", str(self.workdir), "--protected-mode", "yes"]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port_named(self.port, self.proc, "redis-server")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None
