"""The swarm over TLS against wrk, behind a real terminator (``bench_results/swarm/tls``).

    flock /tmp/mcpfast-bench.lock python -m benchmarks.swarm_tls --out bench_results/swarm/tls

haproxy (one thread) terminates TLS in front of ``mcpfast serve --transport http``; both are
pinned to core 0, the generator (wrk, or one Locust process on the native engine) to core 1.
haproxy has an https and a plain http frontend to the same backend, so the same server is
measured with and without TLS. Rounds alternate, the order turning each round
(``benchmarks.harness.alternate``):

* ``wrk https``: ``wrk -t1 -c32`` with ``benchmarks/lua/echo.lua`` (tools/call echo on one
  session) against the https frontend;
* ``native https``: ``loadtests/tools_call.py``, 32 users, ``--mcp-ca-file`` the private CA;
* ``wrk http`` and ``native http``: the same against the plain frontend (the engine's CPU per
  call without TLS, and the ratio to wrk without it).

The rate of each Locust run is its µs histograms' count over its duration (ramp included, a
floor); the engine's CPU per call is the engine threads' CPU over the calls. Then one handshake
run with ``--mcp-new-connection session`` over https: its ``tls:handshake`` and ``connect`` counts
against haproxy's own count of TLS connections (``show info`` on its stats socket). The private
CA is made with the ``openssl`` command. Writes ``results.json`` and ``results.md``.
"""

from __future__ import annotations

import json
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import (
    GENERATOR_CPU,
    SERVER_CPU,
    Record,
    alternate,
    arguments,
    cpu_seconds,
    head,
    medians,
    pinned,
    ratio,
    write,
)
from benchmarks.swarm_native import ECHO_LUA, locust, open_session, reference_server, wrk_stats
from mcpfast.bench.procs import ServerProcess, free_port, wait_port

USERS = 32


def make_ca(folder: Path) -> tuple[Path, Path]:
    """A private CA and a leaf for 127.0.0.1/localhost: (CA PEM, haproxy's cert+key PEM)."""

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)

    curve = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes")
    openssl("req", "-x509", *curve, "-keyout", "ca.key", "-out", "ca.pem", "-subj", "/CN=mcpfast bench CA", "-days", "2")
    openssl("req", *curve, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost")
    (folder / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl(
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "san.ext",
    )
    bundle = folder / "haproxy.pem"
    bundle.write_bytes((folder / "server.pem").read_bytes() + (folder / "server.key").read_bytes())
    return folder / "ca.pem", bundle


class Haproxy:
    """haproxy on the server core: https on ``tls_port``, plain http on ``plain_port``."""

    def __init__(self, folder: Path, bundle: Path, backend_port: int) -> None:
        self.tls_port, self.plain_port = free_port(), free_port()
        self.socket = folder / "haproxy.sock"
        cfg = folder / "haproxy.cfg"
        cfg.write_text(
            f"global\n    maxconn 4000\n    nbthread 1\n    stats socket {self.socket} level admin\n\n"
            "defaults\n    mode http\n    timeout connect 5s\n    timeout client 60s\n    timeout server 60s\n\n"
            f"frontend https\n    bind 127.0.0.1:{self.tls_port} ssl crt {bundle} alpn http/1.1\n    default_backend mcp\n\n"
            f"frontend http\n    bind 127.0.0.1:{self.plain_port}\n    default_backend mcp\n\n"
            f"backend mcp\n    server s1 127.0.0.1:{backend_port}\n"
        )
        self.proc = subprocess.Popen(
            pinned(["haproxy", "-db", "-f", str(cfg)], SERVER_CPU), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        wait_port(self.tls_port, self.proc)

    def info(self) -> dict[str, str]:
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(str(self.socket))
            s.sendall(b"show info\n")
            data = b""
            while chunk := s.recv(65536):
                data += chunk
        return dict(line.split(": ", 1) for line in data.decode().splitlines() if ": " in line)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def server_core_cpu(server: ServerProcess, proxy: Haproxy) -> float:
    """CPU seconds used so far by haproxy and mcpfast serve (the processes on the server core)."""
    return cpu_seconds(server.pid) + cpu_seconds(proxy.proc.pid)


CLIENTS = ["wrk https", "native https", "wrk http", "native http"]


def measure(client: str, url: str, secs: int, py: str, sid: str, ca: Path, server: ServerProcess, proxy: Haproxy) -> dict[str, Any]:
    """One client's run: its rate, and the server core's CPU per call (haproxy + mcpfast serve) meanwhile;
    for Locust also its failures, the engine's CPU per call, p50 and TLS handshakes."""
    cpu0, t0 = server_core_cpu(server, proxy), time.monotonic()
    if client.startswith("wrk"):
        rps = wrk_stats(url, ECHO_LUA, secs, USERS, 1, {"SID": sid})["rps"]
        r: dict[str, Any] = {"rps": rps}
    else:
        run = locust(py, "tools_call", url, USERS, secs, "native", "--mcp-ca-file", str(ca))
        rps = run["rps"]
        echo = run["rows"]["tools/call:echo"]
        r = {
            "rps": rps,
            "failures": run["failures"],
            "engine_cpu_us_per_call": run["generator"]["engine_cpu_s"] * 1e6 / echo["count"],
            "p50_us": echo["p50"],
            "handshakes": run["rows"].get("tls:handshake", {}).get("count", 0),
        }
    r["server_cpu_us_per_call"] = (server_core_cpu(server, proxy) - cpu0) * 1e6 / (rps * (time.monotonic() - t0))
    return r


def main(argv: list[str] | None = None) -> int:
    ap = arguments("swarm_tls", __doc__, "swarm/tls", seconds=8, rounds=5)
    args = ap.parse_args(argv)
    out = Path(args.out)
    py, secs = args.python, args.seconds
    record = Record("swarm_tls", argv, lock=True)
    rounds: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        ca, bundle = make_ca(Path(tmp))
        server = reference_server(py)
        proxy = Haproxy(Path(tmp), bundle, server.port)
        https = f"https://127.0.0.1:{proxy.tls_port}/mcp"
        http = f"http://127.0.0.1:{proxy.plain_port}/mcp"
        try:
            sid = open_session(server.url)

            def run_client(client: str, _rnd: int) -> dict[str, Any]:
                return measure(client, https if client.endswith("https") else http, secs, py, sid, ca, server, proxy)

            done = alternate(CLIENTS, args.rounds, run_client, rotate=True)
            for i in range(args.rounds):
                r: dict[str, Any] = {"round": i, "loadavg": done.loadavg[i], "order": done.orders[i]}
                for client, values in done.round(i).items():
                    r.update({f"{client.replace(' ', '_')}_{k}": v for k, v in values.items()})
                r["rate_ratio_native_over_wrk_https"] = ratio(r["native_https_rps"], r["wrk_https_rps"])
                r["rate_ratio_native_over_wrk_http"] = ratio(r["native_http_rps"], r["wrk_http_rps"])
                r["cpu_ratio_tls_over_plain"] = ratio(r["native_https_engine_cpu_us_per_call"], r["native_http_engine_cpu_us_per_call"])
                rounds.append(r)
                print(json.dumps(r), flush=True)
            before = proxy.info()
            hs = locust(py, "handshake", https, USERS, secs, "native", "--mcp-ca-file", str(ca), "--mcp-new-connection", "session")
            after = proxy.info()
            handshakes = {
                "tls_handshake_rows": hs["rows"]["tls:handshake"]["count"],
                "connect_rows": hs["rows"]["connect"]["count"],
                "initialize_rows": hs["rows"]["initialize"]["count"],
                "failures": hs["failures"],
                "haproxy_tls_connections": int(after["CumSslConns"]) - int(before["CumSslConns"]),
                "haproxy_connections": int(after["CumConns"]) - int(before["CumConns"]),
                "tls_handshake_p50_us": hs["rows"]["tls:handshake"]["p50"],
                "rps": hs["rps"],
            }
        finally:
            proxy.stop()
            server.stop()
    results = record.finish(
        rounds=rounds,
        handshake_new_connection_session=handshakes,
        median=medians(rounds, [k for k in rounds[0] if k not in ("round", "loadavg", "order")]),
    )
    write(out, "results", results, render(results))
    print(render(results))
    return 0


def render(res: dict[str, Any]) -> str:
    m, hs = res["median"], res["handshake_new_connection_session"]
    rr = [r["rate_ratio_native_over_wrk_https"] for r in res["rounds"]]
    cr = [r["cpu_ratio_tls_over_plain"] for r in res["rounds"]]
    return f"""# The swarm over TLS vs wrk, behind haproxy

{head(res)}
haproxy (1 thread, TLS termination) and `mcpfast serve` on core {SERVER_CPU}, the generator on core {GENERATOR_CPU}, {len(res["rounds"])} rounds in turn, every round in `results.json`; each figure is its own median over the rounds.
Per-round ratios: rate {min(rr):.2f}-{max(rr):.2f}, CPU {min(cr):.2f}-{max(cr):.2f}.

| measure | value | target |
| --- | ---: | --- |
| wrk `-t1 -c32`, tools/call over https (req/s) | {m["wrk_https_rps"]:,.0f} | |
| Locust + native engine, 32 users, over https (req/s) | {m["native_https_rps"]:,.0f} | |
| ratio native / wrk over https | {m["rate_ratio_native_over_wrk_https"]:.2f} | >= 0.9 |
| wrk and native over plain http, same haproxy (req/s) | {m["wrk_http_rps"]:,.0f} / {m["native_http_rps"]:,.0f} ({m["rate_ratio_native_over_wrk_http"]:.2f}) | |
| failures over https / over http | {m["native_https_failures"]:.0f} / {m["native_http_failures"]:.0f} | 0 |
| engine CPU per call over https (µs) | {m["native_https_engine_cpu_us_per_call"]:.2f} | |
| engine CPU per call over plain http, same haproxy (µs) | {m["native_http_engine_cpu_us_per_call"]:.2f} | |
| ratio TLS / plain | {m["cpu_ratio_tls_over_plain"]:.2f} | <= 1.5 |
| p50 tools/call over https / http (µs) | {m["native_https_p50_us"]:.0f} / {m["native_http_p50_us"]:.0f} | |
| TLS handshakes per tools/call run (one kept-alive connection per user) | {m["native_https_handshakes"]:.0f} | {USERS} |
| server core's CPU per call (haproxy + serve; µs), wrk / native, https | {m["wrk_https_server_cpu_us_per_call"]:.1f} / {m["native_https_server_cpu_us_per_call"]:.1f} | |
| the same over plain http | {m["wrk_http_server_cpu_us_per_call"]:.1f} / {m["native_http_server_cpu_us_per_call"]:.1f} | |

Handshake family over https with `--mcp-new-connection session` ({hs["rps"]:,.0f} req/s, {hs["failures"]} failures):
`tls:handshake` rows {hs["tls_handshake_rows"]:,}, `connect` rows {hs["connect_rows"]:,}, `initialize` rows {hs["initialize_rows"]:,};
haproxy counted {hs["haproxy_tls_connections"]:,} TLS connections ({hs["haproxy_connections"]:,} connections in all; the difference
is the plain and the stats-socket ones, and the probes before the run). p50 TLS handshake {hs["tls_handshake_p50_us"]:.0f} µs.
"""


if __name__ == "__main__":
    raise SystemExit(main())
