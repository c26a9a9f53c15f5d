"""The swarm over TLS against wrk, behind a real terminator (``bench_results/swarm/tls``).

    flock /tmp/mcpfast-bench.lock python benchmarks/swarm_tls.py --out bench_results/swarm/tls

haproxy (one thread) terminates TLS in front of ``mcpfast serve --transport http``; both are
pinned to core 0, the generator (wrk, or one Locust process on the native engine) to core 1.
haproxy has an https and a plain http frontend to the same backend, so the same server is
measured with and without TLS. Rounds alternate, the order turning each round:

* ``wrk https``: ``wrk -t1 -c32`` with ``bench_results/http/echo.lua`` (tools/call echo on one
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

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mcpfast.bench.procs import free_port, wait_port  # noqa: E402
from mcpfast.bench.swarm_native import ECHO_LUA, SERVER_CORE, Server, locust, wrk_stats  # noqa: E402

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
            ["taskset", "-c", SERVER_CORE, "haproxy", "-db", "-f", str(cfg)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
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


def server_core_cpu(server: Server, proxy: Haproxy) -> float:
    """CPU seconds used so far by haproxy and mcpfast serve (the processes on the server core)."""
    total = 0.0
    for pid in (server.proc.pid, proxy.proc.pid):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "bench_results" / "swarm" / "tls"))
    ap.add_argument("--seconds", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    py, secs = args.python, args.seconds
    results: dict[str, Any] = {
        "command": "flock /tmp/mcpfast-bench.lock python benchmarks/swarm_tls.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "loadavg_start": _loadavg(),
        "rounds": [],
    }
    with tempfile.TemporaryDirectory() as tmp:
        ca, bundle = make_ca(Path(tmp))
        server = Server(py)
        proxy = Haproxy(Path(tmp), bundle, server.port)
        https = f"https://127.0.0.1:{proxy.tls_port}/mcp"
        http = f"http://127.0.0.1:{proxy.plain_port}/mcp"
        try:
            sid = server.session()
            clients = ["wrk https", "native https", "wrk http", "native http"]
            for i in range(args.rounds):
                r: dict[str, Any] = {"round": i, "loadavg": _loadavg()}
                for client in clients[i % 4 :] + clients[: i % 4]:
                    key = client.replace(" ", "_")
                    url = https if client.endswith("https") else http
                    cpu0, t0 = server_core_cpu(server, proxy), time.monotonic()
                    if client.startswith("wrk"):
                        rps = r[f"{key}_rps"] = wrk_stats(url, ECHO_LUA, secs, USERS, 1, {"SID": sid})["rps"]
                    else:
                        run = locust(py, "tools_call", url, USERS, secs, "native", "--mcp-ca-file", str(ca))
                        rps = run["rps"]
                    # the server core's CPU per call (haproxy + mcpfast serve) while this client ran
                    r[f"{key}_server_cpu_us_per_call"] = (server_core_cpu(server, proxy) - cpu0) * 1e6 / (rps * (time.monotonic() - t0))
                    if client.startswith("wrk"):
                        continue
                    calls = run["rows"]["tools/call:echo"]["count"]
                    r[f"{key}_rps"] = run["rps"]
                    r[f"{key}_failures"] = run["failures"]
                    r[f"{key}_engine_cpu_us_per_call"] = run["generator"]["engine_cpu_s"] * 1e6 / calls
                    r[f"{key}_p50_us"] = run["rows"]["tools/call:echo"]["p50"]
                    r[f"{key}_handshakes"] = run["rows"].get("tls:handshake", {}).get("count", 0)
                r["rate_ratio_native_over_wrk_https"] = r["native_https_rps"] / r["wrk_https_rps"]
                r["rate_ratio_native_over_wrk_http"] = r["native_http_rps"] / r["wrk_http_rps"]
                r["cpu_ratio_tls_over_plain"] = r["native_https_engine_cpu_us_per_call"] / r["native_http_engine_cpu_us_per_call"]
                results["rounds"].append(r)
                print(json.dumps(r), flush=True)
            before = proxy.info()
            hs = locust(py, "handshake", https, USERS, secs, "native", "--mcp-ca-file", str(ca), "--mcp-new-connection", "session")
            after = proxy.info()
            results["handshake_new_connection_session"] = {
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
    rounds = results["rounds"]
    keys = [k for k in rounds[0] if k not in ("round", "loadavg")]
    results["median"] = {k: statistics.median(r[k] for r in rounds) for k in keys}
    results["loadavg_end"] = _loadavg()
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    (out / "results.md").write_text(render(results))
    print(render(results))
    return 0


def render(res: dict[str, Any]) -> str:
    m, hs = res["median"], res["handshake_new_connection_session"]
    rr = [r["rate_ratio_native_over_wrk_https"] for r in res["rounds"]]
    cr = [r["cpu_ratio_tls_over_plain"] for r in res["rounds"]]
    return f"""# The swarm over TLS vs wrk, behind haproxy

Command: `{res["command"]}` (started {res["started"]}, load average at start {res["loadavg_start"]}, end {res["loadavg_end"]}).
haproxy (1 thread, TLS termination) and `mcpfast serve` on core 0, the generator on core 1, {len(res["rounds"])} rounds in turn, every round in `results.json`; each figure is its own median over the rounds.
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
