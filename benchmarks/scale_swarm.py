"""``python -m benchmarks.scale_swarm``: the swarm (``loadtests/``) against two processes behind a proxy.

Starts a ``redis-server``, two ``mcpfast serve --transport http --store redis://…`` processes (the
demo app) and ``benchmarks/rr_proxy.py`` in front of them (every request to the other process),
then runs ``locust -f loadtests/`` headless against the proxy once per core implementation
(``MCPFAST_CORE=rust``, ``python``), bounded in users and time, and reports Locust's own totals
(from its CSV), the failures by kind, and how many requests each process got (the proxy's
count), into ``--out`` (``bench_results/scale/swarm.md`` and ``swarm.json``).
"""

from __future__ import annotations

import argparse
import csv
import itertools
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import ROOT, Record, head, results_dir, write
from benchmarks.scale import Redis, serve
from mcpfast.bench.procs import ServerProcess, free_port, stop_process, wait_port

__all__ = ["main"]

PROXY = Path(__file__).with_name("rr_proxy.py")


NOTE = (
    "Who counts what: Locust counts a request once its user has read and timed the answer; the proxy counts it "
    "when it sends it on, and logs it as cut when the client left before the whole answer reached it. This swarm "
    "has no start-up probe (the scenario family sits out without --mcp-scenario), excludes no warm-up (no "
    "--reset-stats), and times the on_stop DELETEs like any request, so the only requests the proxy can carry "
    "that Locust never counts are those of users stopped at the time limit with a request in flight (at most "
    "one per user): cut ones, or ones whose answer had reached the user's socket but was not read yet (not cut). "
    "GET streams are closed by their clients as a matter of course (Locust times the opening), so they are cut "
    "with no difference."
)

EVENT_METRICS = (":gap", ":first-event")
"""Locust entries that time SSE events, not HTTP requests (``mcpfast/locust``)."""


def _totals(prefix: Path) -> dict[str, Any]:
    rows = list(csv.DictReader((prefix.parent / f"{prefix.name}_stats.csv").open()))
    agg = next(r for r in rows if r["Name"] == "Aggregated")
    failures = list(csv.DictReader((prefix.parent / f"{prefix.name}_failures.csv").open()))
    return {
        "requests": int(agg["Request Count"]),
        "failures": int(agg["Failure Count"]),
        "http_requests": sum(int(r["Request Count"]) for r in rows if r["Name"] != "Aggregated" and not r["Name"].endswith(EVENT_METRICS)),
        "by_name": {f"{r['Type']} {r['Name']}": int(r["Request Count"]) for r in rows if r["Name"] != "Aggregated"},
        "failure_kinds": {f"{r['Name']}: {r['Error']}": int(r["Occurrences"]) for r in failures},
    }


def _by_rpc(by_name: dict[str, int]) -> dict[str, int]:
    """Locust's HTTP entries by what the proxy logs: ``DELETE``, ``GET`` or the POST's JSON-RPC method."""
    out: dict[str, int] = {}
    for name, count in by_name.items():
        entry = name.split(" ", 1)[1] if " " in name else name
        if entry.endswith(EVENT_METRICS):
            continue
        key = "GET" if entry.startswith("GET") else entry.split(":", 1)[0].split(" ", 1)[0]
        out[key] = out.get(key, 0) + count
    return out


def run(opts: argparse.Namespace, record: Record) -> dict[str, Any]:
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp())
    results: dict[str, Any] = {}
    redis = Redis(work)
    procs: list[ServerProcess] = []
    try:
        for _ in range(2):
            procs.append(serve(redis.url, work, pin=False))
        for core in ("rust", "python"):
            port = free_port()
            proxy_log = work / f"proxy-{core}.log"
            with proxy_log.open("wb") as plog:
                proxy = subprocess.Popen(
                    [sys.executable, str(PROXY), str(port), *(str(p.port) for p in procs)],
                    stdout=plog,
                    stderr=subprocess.STDOUT,
                )
            wait_port(port, proxy)
            prefix = work / f"swarm-{core}"
            argv = [sys.executable, "-m", "locust", "-f", str(ROOT / "loadtests"), "--headless", "-u", str(opts.users), "-r", str(opts.users),
                    "-t", f"{opts.duration}s", "--host", f"http://127.0.0.1:{port}/mcp", "--csv", str(prefix), "--only-summary"]  # fmt: skip
            started = time.monotonic()
            done = subprocess.run(
                argv, env={**os.environ, "MCPFAST_CORE": core}, capture_output=True, text=True, timeout=opts.duration + 120, cwd=str(ROOT)
            )
            stop_process(proxy, timeout=15)
            proxied = [line.split() for line in proxy_log.read_text().splitlines() if line[:1].isdigit()]
            backends = [fields[0] for fields in proxied]
            methods = [fields[1] for fields in proxied if len(fields) > 1]
            rpc = [fields[1] if fields[1] != "POST" else fields[2] for fields in proxied if len(fields) > 2]
            cut_lines = [line.split() for line in proxy_log.read_text().splitlines() if line.startswith("cut ")]
            cut = [f[1] if f[1] != "POST" else f[2] for f in cut_lines if len(f) > 2]
            session_not_found = (done.stdout + done.stderr).lower().count("session not found")
            results[core] = {
                "command": f"MCPFAST_CORE={core} " + shlex.join(argv),
                "exit": done.returncode,
                "wall_seconds": round(time.monotonic() - started, 1),
                **_totals(prefix),
                "session_not_found_in_output": session_not_found,
                "proxied_requests": len(backends),
                "proxied_by_method": {m: methods.count(m) for m in sorted(set(methods))},
                "per_process": {b: backends.count(b) for b in sorted(set(backends))},
                "consecutive_same_process": sum(1 for x, y in itertools.pairwise(backends) if x == y),
                "proxied_by_rpc": {m: rpc.count(m) for m in sorted(set(rpc))},
                "cut_by_rpc": {m: cut.count(m) for m in sorted(set(cut))},
            }
            results[core]["locust_by_rpc"] = _by_rpc(results[core]["by_name"])
    finally:
        for p in procs:
            p.stop(timeout=15)
        redis.stop()
    results = record.finish(**results)
    write(out, "swarm", results)
    lines = ["# The swarm against two processes sharing one Redis, behind a round-robin proxy", "",
             head(results), "",
             "| core | Locust entries (incl. SSE event timings) | of them HTTP requests | failures | \"session not found\" | proxied requests (by method) | per process | same process twice in a row |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for core in ("rust", "python"):
        r = results.get(core)
        if r:
            lines.append(
                f"| {core} | {r['requests']} | {r['http_requests']} | {r['failures']} | {r['session_not_found_in_output']} "
                f"| {r['proxied_requests']} {r['proxied_by_method']} | {r['per_process']} | {r['consecutive_same_process']} |"
            )
    for core in ("rust", "python"):
        r = results.get(core)
        if not r or "proxied_by_rpc" not in r:
            continue
        lines += ["", f"Locust against the proxy, by request ({core}): what the proxy carried and Locust did not count", "",
                  "| request | Locust | proxy | proxy - Locust | cut off (the client left before its whole answer reached it) |",
                  "|---|---|---|---|---|"]  # fmt: skip
        keys = sorted(set(r["locust_by_rpc"]) | set(r["proxied_by_rpc"]))
        cuts = r.get("cut_by_rpc", {})
        for key in keys:
            lo, px = r["locust_by_rpc"].get(key, 0), r["proxied_by_rpc"].get(key, 0)
            lines.append(f"| {key} | {lo} | {px} | {px - lo:+d} | {cuts.get(key, 0)} |")
        lines.append(f"| all | {sum(r['locust_by_rpc'].values())} | {sum(r['proxied_by_rpc'].values())} | "
                     f"{sum(r['proxied_by_rpc'].values()) - sum(r['locust_by_rpc'].values()):+d} | {sum(cuts.values())} |")  # fmt: skip
    lines += ["", NOTE]
    for core in ("rust", "python"):
        r = results.get(core)
        if r and r["failure_kinds"]:
            lines += ["", f"Failures ({core}):", *(f"- {k}: {v}" for k, v in r["failure_kinds"].items())]
    (out / "swarm.md").write_text("\n".join(lines) + "\n")
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scale_swarm", description=__doc__.split("\n")[0])
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--duration", type=int, default=30)
    parser.add_argument("--out", default=str(results_dir("scale")))
    run(parser.parse_args(argv), Record("scale_swarm", argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
