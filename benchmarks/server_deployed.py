"""``python -m benchmarks.server_deployed``: ``mcpfast serve`` as it is deployed, against the plain server.

What a deployed server turns on (Prometheus metrics, an OAuth resource server, TLS in the
server, ``async def`` tools, stdio) measured in one run beside the plain server, as server CPU
per ``tools/call``. Every side is one configuration on a fresh server, pinned to ``SERVER_CPU``,
its client pinned to ``GENERATOR_CPU`` (``benchmarks.harness``); ``--rounds`` rounds, each
measuring every side once, the order rotating from round to round (``harness.alternate``), and
per round the ratio of each side to the side it is compared with, summarised by the median
(``harness.spread``). The sides, by client:

* ``mcpfast-load calls`` (``--connections`` sessions, one call in flight each, ``--warmup``
  then ``--seconds`` measured; the server's CPU over the measured window, as
  ``benchmarks.server_canned`` measures it): the plain server (``benchmarks.deployed_apps:plain``,
  a plain ``def echo``); ``--metrics``; ``--auth-jwks`` with a valid bearer token
  (``mcpfast token``, sent with ``--token``); the ``async def echo`` app; the ``async def`` app
  with OAuth and metrics. Each is compared with the plain server.
* wrk (``benchmarks/lua/echo.lua``: tools/call echo on one session, ``-t1 -c32``, as
  ``benchmarks.swarm_tls`` runs it) and the swarm (``loadtests/tools_call.py``, Locust on the
  native engine, 32 users, ``--mcp-ca-file`` over https: its first run against a fresh server,
  counted whole) against three servers each: the plain server over http; TLS in the server
  (``--tls-cert/--tls-key``); and the plain server behind haproxy terminating TLS
  (``swarm_tls.Haproxy``, one thread, on the server's core): the yardstick, whose CPU is
  haproxy's plus the server's. TLS in the server is compared with both.
* stdio (``stdio_bench.run_server``: ``--inflight`` calls in flight over the pipes):
  ``mcpfast serve --transport stdio`` against ``benchmarks.canned_stdio``, whose replies are
  compared with mcpfast's byte for byte first.

After each measured run of a side with ``--metrics``, ``/metrics`` is read and its
``mcpfast_http_requests_total`` compared with the generator's own count of every request it made
(by method and status, exactly); then the same after a run of a tool that takes the context
(``echo_context``: the full path) and a run of handshakes (``initialize``, ``initialized``,
``DELETE``).

Output in ``--out`` (``bench_results/server/deployed``): ``results.json`` (every round and
generator summary, the machine, the load average before and after, the commands) and
``results.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shlex
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from benchmarks.harness import (
    GENERATOR_CPU,
    ROOT,
    SERVER_CPU,
    Record,
    affinity,
    alternate,
    arguments,
    cpu_seconds,
    exit_on_problems,
    fill_presets,
    head,
    medians,
    pinned,
    publish,
    ratios,
    results_dir,
    round_problems,
    spread,
)
from benchmarks.http_peers import LOAD_BIN, failure_count, load_binary, measure_rate
from benchmarks.stdio_bench import ECHO_TEXT, PROTOCOL, run_server, server_command
from benchmarks.swarm_native import ECHO_LUA, locust, open_session, wrk_stats
from benchmarks.swarm_tls import Haproxy, make_ca
from mcpfast.bench.procs import ServerProcess, child_env, free_port, log_path, reference_argv
from mcpfast.client.probe import metrics_url

__all__ = ["SIDES", "Side", "main", "metrics_counts", "run", "server_argv", "stdio_replies"]

HOST = "127.0.0.1"
APPS = "benchmarks.deployed_apps"
ISSUER = "https://auth.bench.test"
RESOURCE = "https://mcp.bench.test/mcp"
"""The canonical resource URI the server is told (``--resource-url``) and the token's audience."""
ECHO_ARGUMENTS = '{"text":"hello"}'
READY_TIMEOUT = 30.0
YARDSTICK_LIMIT = 1.0
"""TLS in the server may cost at most what the plain server and haproxy in front of it cost together."""

DEFAULTS = {"seconds": 7.0, "warmup": 2.0, "rounds": 4}
"""About 12 minutes in all."""
QUICK = {"seconds": 2.0, "warmup": 1.0, "rounds": 1}
"""About a minute: a smoke run, not figures to quote."""


@dataclass(frozen=True)
class Side:
    """One configuration measured in every round: what is served, how, and what it is held to."""

    label: str
    serve: str
    """What the table says ``mcpfast serve`` runs with."""
    client: str
    """``load`` (mcpfast-load), ``wrk``, ``swarm`` (Locust, native engine) or ``stdio``."""
    app: str = "plain"
    metrics: bool = False
    auth: bool = False
    tls: bool = False
    proxy: bool = False
    """The plain server behind haproxy, which terminates TLS (the yardstick of ``tls``)."""
    base: str | None = None
    """The side this one's CPU per call is divided by, round by round."""
    limit: float | None = None
    """The most that ratio may be."""


SIDES = (
    Side("plain", "nothing (plain `def` tool)", "load"),
    Side("metrics", "`--metrics` (Prometheus `/metrics`)", "load", metrics=True, base="plain", limit=1.5),
    Side("oauth", "`--auth-jwks ...` (OAuth resource server, a valid bearer token)", "load", auth=True, base="plain", limit=1.5),
    Side("async", "the tool is `async def`", "load", app="async_echo", base="plain", limit=1.5),
    Side(
        "async+oauth+metrics",
        "`async def` tool + OAuth + metrics",
        "load",
        app="async_echo",
        metrics=True,
        auth=True,
        base="plain",
        limit=2.0,
    ),
    Side("plain wrk", "nothing, wrk over http", "wrk"),
    Side("tls wrk", "`--tls-cert/--tls-key` (TLS in the server), wrk", "wrk", tls=True, base="plain wrk", limit=1.5),
    Side("haproxy wrk", "nothing, behind haproxy terminating TLS, wrk (haproxy + server)", "wrk", proxy=True),
    Side("plain swarm", "nothing, the swarm's first run over http", "swarm"),
    Side("tls swarm", "TLS in the server, the swarm's first run against a fresh server", "swarm", tls=True, base="plain swarm", limit=1.5),
    Side("haproxy swarm", "nothing, behind haproxy terminating TLS, the swarm's first run (haproxy + server)", "swarm", proxy=True),
    Side("stdio canned", "the canned stdio responder (`benchmarks.canned_stdio`)", "stdio"),
    Side("stdio", "`--transport stdio` (demo app)", "stdio", base="stdio canned", limit=1.2),
)
BY_LABEL = {side.label: side for side in SIDES}
YARDSTICK = {"tls wrk": "haproxy wrk", "tls swarm": "haproxy swarm"}
"""TLS in the server against the plain server behind haproxy, for the same client."""

# what mcpfast-load calls a phase -> the method and status /metrics counts it under
_PHASES = {
    "initialize": ("initialize", "200"),
    "notifications/initialized": ("notifications/initialized", "202"),
    "tools/call": ("tools/call", "200"),
    "delete": ("DELETE", "200"),
}
_REQUESTS_TOTAL = "mcpfast_http_requests_total"
_PSEUDO_ROWS = ("connect", "tls:handshake")
"""The swarm's rows that are no request (a connection opened, a TLS handshake)."""


@dataclass(frozen=True)
class Setup:
    """What every run shares: the private CA and the server's certificate, the signing key's JWKS and a token."""

    folder: Path
    ca: Path
    bundle: Path
    cert: Path
    key: Path
    jwks: Path
    token: str


def prepare(folder: Path, python: str, ttl: int) -> Setup:
    """A private CA with a leaf for 127.0.0.1 (``swarm_tls.make_ca``), a signing key and its JWKS,
    and a bearer token for ``RESOURCE`` from ``ISSUER`` that lasts ``ttl`` seconds (``mcpfast token``)."""
    ca, bundle = make_ca(folder)
    signing, jwks = folder / "auth-key.pem", folder / "jwks.json"
    token_cmd = [python, "-m", "mcpfast", "token"]
    subprocess.run([*token_cmd, "--new-key", str(signing), "--jwks", str(jwks)], check=True, capture_output=True, env=child_env(), cwd=ROOT)
    minted = subprocess.run(
        [*token_cmd, "--key", str(signing), "--issuer", ISSUER, "--audience", RESOURCE, "--subject", "bench", "--ttl", str(ttl)],
        check=True,
        capture_output=True,
        text=True,
        env=child_env(),
        cwd=ROOT,
    )
    return Setup(folder, ca, bundle, folder / "server.pem", folder / "server.key", jwks, minted.stdout.strip())


# ------------------------------------------------------------------------------------ servers


def server_argv(side: Side, setup: Setup, python: str, port: int) -> list[str]:
    """The ``mcpfast serve --transport http`` command of ``side`` on ``port`` (not pinned)."""
    argv = [*reference_argv(python, HOST, port), "--app", f"{APPS}:{side.app}"]
    if side.metrics:
        argv.append("--metrics")
    if side.auth:
        argv += ["--auth-jwks", str(setup.jwks), "--auth-issuer", ISSUER, "--resource-url", RESOURCE]
    if side.tls:
        argv += ["--tls-cert", str(setup.cert), "--tls-key", str(setup.key)]
    return argv


def _slug(label: str) -> str:
    return label.replace(" ", "-").replace("+", "-")


@contextlib.contextmanager
def started(side: Side, setup: Setup, opts: argparse.Namespace) -> Iterator[tuple[ServerProcess, Haproxy | None]]:
    """A fresh server of ``side`` on ``SERVER_CPU`` (ready once its port accepts, so that no
    request but the client's reaches it), and haproxy in front of it for a ``proxy`` side."""
    port = free_port(HOST)
    argv = pinned(server_argv(side, setup, opts.python, port), SERVER_CPU)
    server = ServerProcess(side.label, argv, HOST, port, log_path=log_path(Path(opts.out), f"server-{_slug(side.label)}.log"))
    with server.start(READY_TIMEOUT):
        proxy = Haproxy(setup.folder, setup.bundle, port) if side.proxy else None
        try:
            yield server, proxy
        finally:
            if proxy is not None:
                proxy.stop()


def _url(side: Side, server: ServerProcess, proxy: Haproxy | None) -> str:
    if proxy is not None:
        return f"https://{HOST}:{proxy.tls_port}/mcp"
    return f"{'https' if side.tls else 'http'}://{HOST}:{server.port}/mcp"


def _server_core_cpu(server: ServerProcess, proxy: Haproxy | None) -> tuple[float, float]:
    """CPU seconds so far of the server and of haproxy (0 without it)."""
    return cpu_seconds(server.pid), cpu_seconds(proxy.proc.pid) if proxy is not None else 0.0


@contextlib.contextmanager
def _trusting(ca: Path) -> Iterator[None]:
    """``urllib.request.urlopen`` trusting the private CA (for ``swarm_native.open_session`` over https)."""
    urllib.request.install_opener(urllib.request.build_opener(urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=ca))))
    try:
        yield
    finally:
        urllib.request.install_opener(None)  # type: ignore[arg-type]  # None restores urlopen's default opener


# -------------------------------------------------------------------------------- measuring


def _token_args(side: Side, setup: Setup) -> list[str]:
    return ["--token", setup.token] if side.auth else []


def _hide_token(summary: dict[str, Any], setup: Setup) -> dict[str, Any]:
    if isinstance(summary.get("command"), str):
        summary["command"] = summary["command"].replace(setup.token, "$TOKEN")
    return summary


def _timeout(opts: argparse.Namespace) -> float:
    return opts.seconds + opts.warmup + 120


def _share(summary: dict[str, Any], block: str) -> float | None:
    data = summary.get(block) or {}
    value = data.get("window_share_of_one_core", data.get("share_of_one_core"))
    return float(value) if isinstance(value, int | float) else None


def measure_load(side: Side, server: ServerProcess, setup: Setup, opts: argparse.Namespace) -> dict[str, Any]:
    """``mcpfast-load calls``: the server's CPU per call over the measured window; with
    ``--metrics``, the count check after it."""
    args = ["--sessions", str(opts.connections), "--duration", str(opts.seconds), "--warmup", str(opts.warmup)]
    args += ["--tool", "echo", "--arguments", ECHO_ARGUMENTS, *_token_args(side, setup)]
    summary = _hide_token(measure_rate(server, "calls", args, _timeout(opts)), setup)
    latency = (summary.get("latency_us") or {}).get("tools/call") or {}
    row: dict[str, Any] = {
        "cpu_us_per_call": (summary.get("server_cpu") or {}).get("us_per_operation"),
        "calls_per_second": summary.get("calls_per_second"),
        "p50_us": latency.get("p50"),
        "p99_us": latency.get("p99"),
        "server_share": _share(summary, "server_cpu"),
        "generator_share": _share(summary, "generator_cpu"),
        "failures": failure_count(summary),
        "calls": summary,
    }
    if side.metrics:
        row["metrics_check"] = count_check(side, server, setup, summary, opts)
    return row


def measure_wrk(side: Side, server: ServerProcess, proxy: Haproxy | None, setup: Setup, opts: argparse.Namespace) -> dict[str, Any]:
    """wrk with ``echo.lua`` on one session for ``--seconds`` (whole seconds): the server core's
    CPU (the server's, and haproxy's) over wrk's run per request wrk counted."""
    seconds = max(1, round(opts.seconds))
    url = _url(side, server, proxy)
    with _trusting(setup.ca):
        sid = open_session(url if side.tls else server.url)
    (server0, proxy0), t0 = _server_core_cpu(server, proxy), time.monotonic()
    stats = wrk_stats(url, ECHO_LUA, seconds, opts.connections, 1, {"SID": sid})
    (server1, proxy1), wall = _server_core_cpu(server, proxy), time.monotonic() - t0
    requests = stats["rps"] * seconds
    return _core_row(server1 - server0, proxy1 - proxy0, requests, wall, {"rps": stats["rps"], "wrk": stats, "url": url, "failures": 0})


def measure_swarm(side: Side, server: ServerProcess, proxy: Haproxy | None, setup: Setup, opts: argparse.Namespace) -> dict[str, Any]:
    """One Locust run (``loadtests/tools_call.py``, native engine) against the fresh server: the
    server core's CPU over the whole run (start, TLS handshakes and session set-up included) per
    request it made."""
    url = _url(side, server, proxy)
    extra = ("--mcp-ca-file", str(setup.ca)) if url.startswith("https") else ()
    (server0, proxy0), t0 = _server_core_cpu(server, proxy), time.monotonic()
    run_ = locust(opts.python, "tools_call", url, opts.connections, max(1, round(opts.seconds)), "native", *extra)
    (server1, proxy1), wall = _server_core_cpu(server, proxy), time.monotonic() - t0
    requests = sum(row["count"] for name, row in run_["rows"].items() if name not in _PSEUDO_ROWS)
    counts = {name: row["count"] for name, row in run_["rows"].items()}
    echo = run_["rows"].get("tools/call:echo") or {}
    extra_figures = {"rps": run_["rps"], "failures": run_["failures"], "rows": counts, "p50_us": echo.get("p50"), "url": url}
    return _core_row(server1 - server0, proxy1 - proxy0, requests, wall, {**extra_figures, "generator": run_["generator"]})


def _core_row(server_cpu: float, proxy_cpu: float, requests: float, wall: float, extra: dict[str, Any]) -> dict[str, Any]:
    per = 1e6 / requests if requests else None
    return {
        "cpu_us_per_call": round((server_cpu + proxy_cpu) * per, 3) if per else None,
        "server_us_per_call": round(server_cpu * per, 3) if per else None,
        "haproxy_us_per_call": round(proxy_cpu * per, 3) if per else None,
        "requests": round(requests),
        "server_cpu_seconds": round(server_cpu, 3),
        "haproxy_cpu_seconds": round(proxy_cpu, 3),
        "wall_seconds": round(wall, 3),
        **extra,
    }


def measure_stdio(side: Side, opts: argparse.Namespace) -> dict[str, Any]:
    """``stdio_bench``'s client, pinned to ``GENERATOR_CPU``, against the server on ``SERVER_CPU``."""
    argv = _stdio_argv(side, opts.python)
    with affinity(GENERATOR_CPU):
        result = run_server(argv, duration=opts.seconds, warmup=opts.warmup, inflight=opts.connections, env=child_env(), cwd=ROOT)
    return {
        "cpu_us_per_call": round(result["server_us_per_call"], 3),
        "client_us_per_call": round(result["client_us_per_call"], 3),
        "calls_per_second": result["calls_per_s"],
        "p50_us": result["p50_ms"] * 1e3,
        "failures": result["errors"] + result["unexpected_ids"],
        "server_argv": shlex.join(argv),
        "run": result,
    }


def _stdio_argv(side: Side, python: str) -> list[str]:
    if side.label == "stdio canned":
        return pinned([python, "-m", "benchmarks.canned_stdio"], SERVER_CPU)
    return server_command("mcpfast", int(SERVER_CPU))


def measure(side: Side, rnd: int, setup: Setup, opts: argparse.Namespace) -> dict[str, Any]:
    """``side`` once, on a fresh server: its CPU per call and what else its client says."""
    tag = f"[server_deployed] round {rnd + 1}: {side.label}"
    print(f"{tag} ...", file=sys.stderr, flush=True)
    try:
        if side.client == "stdio":
            row = measure_stdio(side, opts)
        else:
            with started(side, setup, opts) as (server, proxy):
                if side.client == "load":
                    row = measure_load(side, server, setup, opts)
                elif side.client == "wrk":
                    row = measure_wrk(side, server, proxy, setup, opts)
                else:
                    row = measure_swarm(side, server, proxy, setup, opts)
                row["server_argv"] = shlex.join(server.argv)
    except (RuntimeError, OSError, subprocess.SubprocessError, KeyError, ValueError) as exc:
        print(f"{tag}: ERROR {exc}", file=sys.stderr, flush=True)
        return {"error": f"{type(exc).__name__}: {exc}"}
    check = row.get("metrics_check")
    counted = f", /metrics counts {'equal' if check and check['equal'] else 'DIFFER'}" if check is not None else ""
    print(f"{tag}: {row['cpu_us_per_call']} µs CPU per call, failures {row.get('failures')}{counted}", file=sys.stderr, flush=True)
    return row


# ------------------------------------------------------------------------- the metrics check


def metrics_counts(text: str) -> dict[str, int]:
    """``mcpfast_http_requests_total`` of a Prometheus page, as ``{"METHOD STATUS": count}``."""
    counts: dict[str, int] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == _REQUESTS_TOTAL:
                key = f"{sample.labels.get('method')} {sample.labels.get('status')}"
                counts[key] = counts.get(key, 0) + int(sample.value)
    return counts


def generator_counts(summaries: list[dict[str, Any]]) -> dict[str, int]:
    """Every request ``mcpfast-load`` runs made and had answered, as ``/metrics`` counts them.

    Raises:
        ValueError: a run had failures, or a phase this check does not know (its status is not
            known here, so no exact comparison could be made).
    """
    counts: dict[str, int] = {}
    for summary in summaries:
        if failure_count(summary):
            raise ValueError(f"{failure_count(summary)} failed requests: {summary.get('failures')}")
        for phase, figures in (summary.get("requests") or {}).items():
            if phase not in _PHASES:
                raise ValueError(f"a phase the check does not know: {phase!r}")
            if figures.get("ok_total"):
                key = " ".join(_PHASES[phase])
                counts[key] = counts.get(key, 0) + int(figures["ok_total"])
    return counts


def _read_page(server: ServerProcess) -> str:
    with urllib.request.urlopen(metrics_url(server.url), timeout=5) as resp:  # 127.0.0.1
        return str(resp.read().decode())


def count_check(side: Side, server: ServerProcess, setup: Setup, measured: dict[str, Any], opts: argparse.Namespace) -> dict[str, Any]:
    """``/metrics`` against the generator's counts: after the measured run (tools/call of
    ``echo``, the short path), after a run of ``echo_context`` (a tool that takes the context:
    the full path) and after a run of handshakes, each time every request so far, exactly."""
    summaries = [measured]
    steps: list[dict[str, Any]] = []
    token = _token_args(side, setup)
    runs = [
        ("measured run: tools/call echo (short path)", None),
        (
            "tools/call echo_context (full path)",
            ["calls", "--sessions", "4", "--duration", "1", "--warmup", "0", "--tool", "echo_context", "--arguments", ECHO_ARGUMENTS],
        ),
        ("handshakes: initialize, initialized, DELETE", ["handshakes", "--connections", "4", "--duration", "1", "--warmup", "0"]),
    ]
    for name, argv in runs:
        try:
            if argv is not None:
                summaries.append(_hide_token(measure_rate(server, argv[0], [*argv[1:], *token], _timeout(opts)), setup))
            expected = generator_counts(summaries)
            page = metrics_counts(_read_page(server))
        except (RuntimeError, OSError, subprocess.SubprocessError, ValueError) as exc:
            steps.append({"step": name, "error": f"{type(exc).__name__}: {exc}", "equal": False})
            break
        steps.append({"step": name, "generator": expected, "metrics": page, "equal": page == expected})
    return {"steps": steps, "equal": all(step["equal"] for step in steps), "extra_runs": summaries[1:]}


# ------------------------------------------------------------------------------ reply check


def _stdio_lines(ids: tuple[int, ...]) -> bytes:
    init = {
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "server-deployed", "version": "1"}},
    }  # fmt: skip
    call = b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":%s}}}\n'
    lines = [json.dumps(init, separators=(",", ":")).encode() + b"\n", b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n']
    return b"".join(lines) + b"".join(call % (i, json.dumps(ECHO_TEXT).encode()) for i in ids)


def stdio_replies(python: str, timeout: float = 30.0) -> dict[str, Any]:
    """The same lines (``initialize``, ``initialized``, three ``tools/call echo`` as
    ``stdio_bench`` sends them) to ``mcpfast serve --transport stdio`` and to the canned
    responder, stdin then closed: their replies, and whether they are the same bytes."""
    lines = _stdio_lines((1, 2, 3))
    out: dict[str, Any] = {}
    for label in ("stdio", "stdio canned"):
        argv = _stdio_argv(BY_LABEL[label], python)
        proc = subprocess.run(argv, input=lines, capture_output=True, timeout=timeout, env=child_env(), cwd=ROOT, check=False)
        out[label] = {"exit": proc.returncode, "replies": proc.stdout.decode(errors="replace").splitlines()}
    same = out["stdio"]["replies"] == out["stdio canned"]["replies"] and len(out["stdio"]["replies"]) == 4
    return {"sides": out, "identical": same}


# ---------------------------------------------------------------------------------- the run


def _ratio(results: dict[str, list[dict[str, Any]]], side: str, base: str) -> dict[str, Any]:
    return spread(ratios((r.get("cpu_us_per_call") for r in results[side]), (r.get("cpu_us_per_call") for r in results[base])))


def _verdict(summary: dict[str, Any], limit: float) -> dict[str, Any]:
    median = summary.get("median")
    return {**summary, "limit": limit, "holds": median is not None and median <= limit}


def tree() -> dict[str, Any]:
    """The checkout measured: its commit, and the files of the server and its core changed but not committed."""

    def git(*args: str) -> str:
        proc = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
        return proc.stdout.strip() if proc.returncode == 0 else ""

    changed = git("status", "--porcelain", "--", "mcpfast", "rust")
    return {"commit": git("rev-parse", "HEAD") or None, "uncommitted": [line[3:] for line in changed.splitlines()]}


def run(opts: argparse.Namespace, record: Record) -> dict[str, Any]:
    out = Path(opts.out)
    sides = [side for side in SIDES if not opts.only or side.label in opts.only]
    load_binary()
    record.machine.update(server_cpu=SERVER_CPU, generator_cpu=GENERATOR_CPU)
    checkout = tree()
    ttl = int(len(sides) * opts.rounds * (opts.seconds + opts.warmup + 30) + 3600)
    with tempfile.TemporaryDirectory(prefix="server-deployed-") as tmp:
        setup = prepare(Path(tmp), opts.python, ttl)
        replies = stdio_replies(opts.python)
        done = alternate(sides, opts.rounds, lambda side, rnd: measure(side, rnd, setup, opts), rotate=True)
    results = {side.label: done.results[side] for side in sides}
    present = set(results)
    versus = {
        side.label: _verdict(_ratio(results, side.label, side.base), side.limit)
        for side in sides
        if side.base in present and side.limit is not None
    }
    yardstick = {
        tls: _verdict(_ratio(results, tls, proxied), YARDSTICK_LIMIT) for tls, proxied in YARDSTICK.items() if {tls, proxied} <= present
    }
    checks = [
        {"side": label, "round": rnd + 1, **row["metrics_check"]}
        for label, rows in results.items()
        for rnd, row in enumerate(rows)
        if "metrics_check" in row
    ]
    keys = ("cpu_us_per_call", "server_us_per_call", "haproxy_us_per_call", "client_us_per_call", "calls_per_second", "rps", "p50_us")
    data = record.finish(
        config={key: getattr(opts, key) for key in ("seconds", "warmup", "rounds", "connections", "quick", "only")},
        generator=str(LOAD_BIN),
        tree=checkout,
        pinning={"server": SERVER_CPU, "generator": GENERATOR_CPU},
        sides={side.label: {"serve": side.serve, "client": side.client, "base": side.base, "limit": side.limit} for side in sides},
        orders=[[side.label for side in order] for order in done.orders],
        loadavg_per_round=done.loadavg,
        stdio_replies=replies,
        rounds=results,
        medians={label: medians([r for r in rows if "error" not in r], keys) for label, rows in results.items()},
        versus=versus,
        yardstick=yardstick,
        metrics_checks=checks,
    )
    publish(out, data, report)
    return data


def problems(data: dict[str, Any]) -> list[str]:
    """What went wrong in a run (errors, failed requests, counts that differ, replies that differ)."""
    found = []
    for label, rows in data["rounds"].items():
        found += round_problems(label, rows)
    found += [
        f"{c['side']} round {c['round']}: /metrics counts differ from the generator's" for c in data["metrics_checks"] if not c["equal"]
    ]
    if not data["stdio_replies"]["identical"]:
        found.append("the canned stdio responder's replies differ from mcpfast's (see stdio_replies)")
    return found


# ------------------------------------------------------------------------------------ report


BEFORE = {
    "plain": 6.4,
    "metrics": 26.4,
    "oauth": 30.9,
    "tls wrk": 10.0,
    "tls swarm": 36.2,
    "async": 23.1,
    "async+oauth+metrics": 41.4,
    "stdio": 4.5,
    "stdio canned": 2.1,
}
"""µs of server CPU per call measured the same way before the short path took these requests
(plain server, metrics, OAuth, async: mcpfast-load; TLS: wrk and the swarm against the plain
server's 6.4; stdio: the same client), for the table's "before" column."""


def _num(value: Any, digits: int = 1) -> str:
    return f"{value:,.{digits}f}" if isinstance(value, int | float) else "–"


def _x(value: Any) -> str:
    return f"{value:.2f}x" if isinstance(value, int | float) else "–"


def _holds(verdict: dict[str, Any] | None) -> str:
    if not verdict:
        return "–"
    return "**yes**" if verdict["holds"] else f"**no** (by {_x(verdict['median'] / verdict['limit'])} of the limit)"


def report(data: dict[str, Any]) -> str:
    """``results.md``: the table of every side, the TLS yardstick, stdio, the metrics counts, every round."""
    cfg, med, versus, yard = data["config"], data["medians"], data["versus"], data["yardstick"]
    lines = [
        "# `mcpfast serve` as deployed, against the plain server",
        "",
        head(data),
        "",
        _checkout(data["tree"]),
        "",
        f"Each server pinned to CPU {SERVER_CPU}, its client to CPU {GENERATOR_CPU}; {cfg['rounds']} rounds, every side once "
        "per round on a fresh server, the order rotating; figures are medians over the rounds, ratios are taken per "
        "round (the side over the one it is compared with) and their median given with their range. "
        f"mcpfast-load: {cfg['connections']} sessions, one call in flight each, {cfg['warmup']:g} s warm-up + "
        f"{cfg['seconds']:g} s measured, the server's CPU in the measured window. wrk: `-t1 -c{cfg['connections']}`, "
        f"`echo.lua`, {max(1, round(cfg['seconds']))} s. The swarm: `loadtests/tools_call.py` on the native engine, "
        f"{cfg['connections']} users, {max(1, round(cfg['seconds']))} s, its first run against the fresh server counted whole. "
        f"stdio: `stdio_bench`'s client, {cfg['connections']} calls in flight.",
        "",
        "| `mcpfast serve` with | client | µs server CPU per tools/call | vs | ratio (median) | range | limit | holds | before, µs |",
        "|---|---|---:|---|---:|---|---:|---|---:|",
    ]
    for label, side in data["sides"].items():
        verdict = versus.get(label)
        cells = [
            side["serve"],
            {"load": "mcpfast-load", "wrk": "wrk", "swarm": "swarm", "stdio": "stdio client"}[side["client"]],
            _num(med[label].get("cpu_us_per_call")),
            side["base"] or "",
            _x(verdict["median"]) if verdict else "",
            f"{_x(verdict['min'])} – {_x(verdict['max'])}" if verdict else "",
            _x(side["limit"]) if side["limit"] else "",
            _holds(verdict),
            _num(BEFORE.get(label)),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "## TLS in the server against haproxy in front of the plain server", ""]
    lines += [
        "The yardstick: the plain server behind haproxy (one thread, on the server's core) terminating TLS, for the same "
        "client; its CPU is haproxy's plus the server's.",
        "",
        "| client | TLS in the server, µs | haproxy + plain server, µs (haproxy, server) | TLS / yardstick (median) | range | holds (≤ 1) |",
        "|---|---:|---:|---:|---|---|",
    ]
    for tls, proxied in YARDSTICK.items():
        if tls not in yard:
            continue
        v, p = yard[tls], med[proxied]
        lines.append(
            f"| {data['sides'][tls]['client']} | {_num(med[tls].get('cpu_us_per_call'))} | {_num(p.get('cpu_us_per_call'))} "
            f"({_num(p.get('haproxy_us_per_call'))}, {_num(p.get('server_us_per_call'))}) | {_x(v['median'])} | "
            f"{_x(v['min'])} – {_x(v['max'])} | {_holds(v)} |"
        )
    lines += _stdio(data)
    lines += _checks(data["metrics_checks"])
    lines += _rounds(data)
    lines += ["", "## Command", "", "```sh", data["command"], "```", ""]
    return "\n".join(lines)


def _checkout(checkout: dict[str, Any]) -> str:
    changed = checkout["uncommitted"]
    dirty = (
        f"; changed and not committed: {', '.join(f'`{path}`' for path in changed)}"
        if changed
        else ", nothing changed in `mcpfast/` or `rust/`"
    )
    return f"Checkout `{(checkout['commit'] or '?')[:12]}`{dirty}."


def _stdio(data: dict[str, Any]) -> list[str]:
    med, replies = data["medians"], data["stdio_replies"]
    if "stdio" not in med or "stdio canned" not in med:
        return []
    verdict = data["versus"].get("stdio") or {}
    same = "the same bytes" if replies["identical"] else "**different bytes**"
    return [
        "",
        "## stdio",
        "",
        f"`mcpfast serve --transport stdio` {_num(med['stdio'].get('cpu_us_per_call'), 2)} µs of server CPU per call, the canned "
        f"responder {_num(med['stdio canned'].get('cpu_us_per_call'), 2)} µs on the same client (ratio {_x(verdict.get('median'))}, "
        f"limit 1.2x: {_holds(verdict or None)}); calls/s {_num(med['stdio'].get('calls_per_second'), 0)} and "
        f"{_num(med['stdio canned'].get('calls_per_second'), 0)}; the client's own CPU per call {_num(med['stdio'].get('client_us_per_call'), 2)} "
        f"and {_num(med['stdio canned'].get('client_us_per_call'), 2)} µs. Their replies to `initialize`, `initialized` and three "
        f"`tools/call echo` (checked before the rounds): {same}.",
    ]


def _checks(checks: list[dict[str, Any]]) -> list[str]:
    if not checks:
        return []
    lines = [
        "",
        "## `/metrics` against the generator's counts",
        "",
        "After each measured run of a side with `--metrics`, `mcpfast_http_requests_total` (method, status) against every "
        "request the generator made and had answered; then after a run of `echo_context` (a tool that takes the context, "
        "served by the full path) and one of handshakes, every request so far.",
        "",
        "| side | round | after | generator | `/metrics` | equal |",
        "|---|---:|---|---|---|---|",
    ]
    for check in checks:
        for step in check["steps"]:
            if "error" in step:
                lines.append(f"| {check['side']} | {check['round']} | {step['step']} | **{step['error']}** | | **no** |")
                continue
            gen = ", ".join(f"{k} {v:,}" for k, v in sorted(step["generator"].items()))
            page = "the same" if step["equal"] else ", ".join(f"{k} {v:,}" for k, v in sorted(step["metrics"].items()))
            lines.append(
                f"| {check['side']} | {check['round']} | {step['step']} | {gen} | {page} | {'yes' if step['equal'] else '**no**'} |"
            )
    return lines


def _rounds(data: dict[str, Any]) -> list[str]:
    lines = ["", "## Every round", "", "In the order run; the load average at the round's start.", ""]
    for rnd, order in enumerate(data["orders"]):
        cells = []
        for label in order:
            row = data["rounds"][label][rnd]
            cells.append(f"{label} {_num(row.get('cpu_us_per_call'))}" if "error" not in row else f"{label} ERROR")
        lines.append(f"- round {rnd + 1} (load {data['loadavg_per_round'][rnd][0]}): " + "; ".join(cells))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = arguments("server_deployed", __doc__, "server/deployed", seconds=float(DEFAULTS["seconds"]), rounds=int(DEFAULTS["rounds"]))
    parser.epilog = (
        f"Defaults: {DEFAULTS['rounds']} rounds, {DEFAULTS['warmup']:g} s + {DEFAULTS['seconds']:g} s per run; --quick: "
        f"{QUICK['rounds']} round, {QUICK['warmup']:g} s + {QUICK['seconds']:g} s. Options given explicitly win over both. "
        f"Results go to {results_dir('server/deployed').relative_to(ROOT)} by default."
    )
    parser.add_argument("--warmup", type=float, default=None, help="seconds of warm-up before each measured window (mcpfast-load, stdio)")
    parser.add_argument("--connections", type=int, default=32, help="connections, sessions, users or calls in flight of every client")
    parser.add_argument("--only", action="append", choices=[side.label for side in SIDES], help="only these sides (repeatable)")
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    parser.set_defaults(seconds=None, rounds=None)
    opts = parser.parse_args(argv)
    fill_presets(opts, QUICK if opts.quick else DEFAULTS)
    return exit_on_problems(problems(run(opts, Record("server_deployed", argv, lock=True))))


if __name__ == "__main__":
    sys.exit(main())
