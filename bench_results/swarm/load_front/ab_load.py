"""Two ``mcpfast-load`` binaries side by side against the same server, in interleaved rounds.

    flock /tmp/mcpfast-bench.lock .venv/bin/python bench_results/swarm/load_front/ab_load.py \\
        --bin old=/tmp/mcpfast-load.old --bin new=target/release/mcpfast-load \\
        --rounds 5 --out bench_results/swarm/load_front/ab.json

Each round starts one fresh ``mcpfast serve --transport http`` (this checkout's ``.venv``) pinned
to core 0 per mode and runs every binary against it from core 1, the order alternating between
rounds; modes: ``calls`` (32 sessions), ``handshakes`` (32 connections), ``churn`` (cycles on 32
connections). The ratio to the first binary is taken per round and its median reported, with the
load average before and after every run (the machine is shared).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from mcpfast.bench.ab_http import ratio_to_first, report
from mcpfast.bench.procs import free_port, pinned, repo_root, stop_process, wait_port

RATE_KEYS = {"calls": "calls_per_second", "handshakes": "handshakes_per_second", "churn": "cycles_per_second"}


def server(root: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    argv = [str(root / ".venv" / "bin" / "python"), "-m", "mcpfast", "serve", "--transport", "http", "--host", "127.0.0.1"]
    argv += ["--port", str(port)]
    proc = subprocess.Popen(
        pinned(argv, 0), cwd=root, env={**os.environ, "MCPFAST_CORE": "rust"}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    wait_port(port, proc, timeout=30)
    return proc, port


def gen_args(mode: str, args: argparse.Namespace, pid: int) -> list[str]:
    if mode == "calls":
        return ["--sessions", "32", "--duration", str(args.duration), "--warmup", str(args.warmup), "--server-pid", str(pid)]
    if mode == "handshakes":
        return ["--connections", "32", "--duration", str(args.duration), "--warmup", str(args.warmup), "--server-pid", str(pid)]
    return ["--cycles", str(args.cycles), "--connections", "32", "--report-every", str(args.cycles // 4)]


def one(binary: str, mode: str, port: int, extra: list[str]) -> dict[str, Any]:
    argv = pinned([binary, mode, "--url", f"http://127.0.0.1:{port}/mcp", *extra], 1)
    load = os.getloadavg()[0]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    s = lines[-1] if lines else {}
    lat = s.get("latency_us", {})
    key = {"calls": "tools/call", "handshakes": "initialize", "churn": "initialize"}[mode]
    cpu = s.get("generator_cpu") or {}
    return {
        "rate": s.get(RATE_KEYS[mode]),
        "p50_us": (lat.get(key) or {}).get("p50"),
        "p99_us": (lat.get(key) or {}).get("p99"),
        "generator_cpu_s": s.get("generator_cpu_seconds"),
        "generator_window_share": cpu.get("window_share_of_one_core"),
        "server_us_per_op": (s.get("server_cpu") or {}).get("us_per_operation"),
        "failures": (s.get("failures") or {}).get("total"),
        "progress_lines": sum(1 for line in lines if line.get("event") == "progress"),
        "exit": done.returncode,
        "load_before": load,
        "load_after": os.getloadavg()[0],
        "command": shlex.join(argv),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin", action="append", required=True, help="LABEL=PATH of an mcpfast-load binary (two or more)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--duration", type=float, default=5.0)
    p.add_argument("--warmup", type=float, default=1.5)
    p.add_argument("--cycles", type=int, default=20000)
    p.add_argument("--modes", nargs="+", default=list(RATE_KEYS), choices=list(RATE_KEYS))
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    bins = dict(b.split("=", 1) for b in args.bin)
    labels = list(bins)
    root = repo_root()
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {m: {b: [] for b in labels} for m in args.modes}
    load_start = os.getloadavg()
    for rnd in range(args.rounds):
        order = labels if rnd % 2 == 0 else labels[::-1]
        for mode in args.modes:
            proc, port = server(root)
            try:
                for label in order:
                    r = one(bins[label], mode, port, gen_args(mode, args, proc.pid))
                    runs[mode][label].append(r)
                    print(
                        f"round {rnd} {mode:10s} {label:5s} {r['rate'] or 0:>9,.0f}/s p50 {r['p50_us']} p99 {r['p99_us']} "
                        f"gen {r['generator_window_share']} exit {r['exit']} load {r['load_after']:.2f}",
                        flush=True,
                    )
            finally:
                stop_process(proc)
    result: dict[str, Any] = {
        "command": shlex.join([sys.executable, *sys.argv]) if argv is None else shlex.join(argv),
        "binaries": bins,
        "config": {"rounds": args.rounds, "duration": args.duration, "warmup": args.warmup, "cycles": args.cycles},
        "load_start": load_start,
        "load_end": os.getloadavg(),
        "runs": runs,
        "median": {
            m: {b: {k: statistics.median(r[k] or 0 for r in runs[m][b]) for k in ("rate", "p50_us", "p99_us")} for b in labels}
            for m in args.modes
        },
        "ratio_to_first": ratio_to_first(runs, labels),
        "ok": all(r["exit"] == 0 for m in runs.values() for rs in m.values() for r in rs),
    }
    return report(result, args.out)


if __name__ == "__main__":
    sys.exit(main())
