"""In-process CPU per call of a server process alone on its core against the same process while
a second one serves on the other core: what ``--workers 2`` shares in the request path.

    python -m benchmarks.workers_inproc --rounds 5 --out bench_results/server/workers_inproc

Over sockets (``server_canned``'s workers part) the generator needs a core of its own, which a
2-CPU machine does not have: one worker shares the generator's core and the kernel's loopback
work lands on whichever process runs, so each worker's CPU per call moves with the load it
carries more than with the number of workers. This benchmark leaves out the sockets and the
generator, and keeps everything a worker process does per request: two ``http_inproc`` workers
(``http_inproc_worker.py``: the demo app through the native HTTP server's connection on a fake
transport), ``A`` pinned to CPU 0 and ``B`` to CPU 1, each timing its own CPU per request
(``process_time``). Per burst, either each runs alone in turn (``alone``) or both at once
(``together``), the order alternating (ABBA); a worker's ratio is the median over bursts of
together ns / alone ns. A lock, a shared process or a store round trip in the request path
would show as a ratio above 1.

* ``stateless``: 2026-07-28 ``tools/call echo`` without a session (the memory store, as
  ``--stateless-only`` runs it);
* ``calls``: ``tools/call echo`` on ``--connections`` sessions kept in Redis (``--store``,
  a ``redis-server`` started for the run); the Redis commands made while the bursts ran are
  counted (Redis's own ``INFO``), and printed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.harness import ROOT, Record, alternate, ratios, write
from benchmarks.http_inproc import WORKER
from benchmarks.scale import Redis
from benchmarks.stdio_inproc import InprocWorker

__all__ = ["main", "measure"]

CPUS = (0, 1)
WITHIN = 0.10


def measure(tree: Path, mode: str, requests: int, bursts: int, envs: dict[str, str], redis: Redis | None = None) -> dict[str, Any]:
    """One round: workers ``A`` and ``B`` (CPUs 0 and 1), a burst each to make their sessions
    (not timed), then ``bursts`` timed bursts of each kind; with ``redis``, the commands it ran
    while they did (``redis_commands``)."""
    workers = {name: InprocWorker(tree, mode, requests, cpu, WORKER, envs) for name, cpu in zip("AB", CPUS, strict=True)}

    def burst(label: str, _n: int) -> dict[str, float]:
        if label == "alone":
            return {name: w.run()["cpu_ns"] for name, w in workers.items()}
        for w in workers.values():
            w.start()
        return {name: w.result()["cpu_ns"] for name, w in workers.items()}

    try:
        for w in workers.values():
            w.run()
        before = redis.commands() if redis is not None else 0
        done = alternate(["alone", "together"], bursts, burst)
        commands = redis.commands() - before - 1 if redis is not None else None  # less the INFO asking
    finally:
        for w in workers.values():
            w.close()
    alone, together = done.results["alone"], done.results["together"]
    return {
        "redis_commands": commands,
        "workers": {
            name: {
                "alone_ns": round(statistics.median(r[name] for r in alone), 1),
                "together_ns": round(statistics.median(r[name] for r in together), 1),
                "together_over_alone": round(statistics.median(ratios((r[name] for r in together), (r[name] for r in alone))), 3),
            }
            for name in workers
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.workers_inproc", description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", type=Path, default=ROOT, help="the tree measured (default: this checkout)")
    parser.add_argument("--modes", default="stateless,calls", help="comma-separated: stateless, calls")
    parser.add_argument("--requests", type=int, default=6400, help="requests per burst")
    parser.add_argument("--bursts", type=int, default=10, help="bursts of each kind per round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (fresh workers each)")
    parser.add_argument("--connections", type=int, default=32, help="calls: sessions served side by side")
    parser.add_argument("--out", type=Path, default=None, help="result directory (results.json and results.md)")
    args = parser.parse_args(argv)
    modes = args.modes.split(",")
    if not modes or any(mode not in ("stateless", "calls") for mode in modes):
        parser.error(f"--modes: stateless and/or calls, not {args.modes!r}")
    tree = args.src.resolve()
    record = Record("workers_inproc", argv, lock=True)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        redis = Redis(Path(tmp)) if "calls" in modes else None
        try:
            for mode in modes:
                envs = {"MCPFAST_INPROC_CONNECTIONS": str(args.connections)}
                if mode == "calls":
                    assert redis is not None
                    envs["MCPFAST_INPROC_STORE"] = redis.url
                per_round = []
                for rnd in range(args.rounds):
                    per_round.append(measure(tree, mode, args.requests, args.bursts, envs, redis if mode == "calls" else None))
                    row = per_round[-1]["workers"]
                    print(
                        f"round {rnd} {mode}: "
                        + "  ".join(
                            f"{n} alone {r['alone_ns']:.0f} ns together {r['together_ns']:.0f} ns ({r['together_over_alone']:.3f})"
                            for n, r in row.items()
                        ),
                        file=sys.stderr,
                        flush=True,
                    )
                pooled = [w["together_over_alone"] for r in per_round for w in r["workers"].values()]
                results[mode] = {
                    "store": "redis" if mode == "calls" else "memory",
                    "rounds": per_round,
                    "together_over_alone_median": round(statistics.median(pooled), 3),
                    "together_over_alone_range": [min(pooled), max(pooled)],
                    "workers_within": sum(1 for v in pooled if abs(v - 1) <= WITHIN),
                    "workers_measured": len(pooled),
                    "redis_commands_while_timed": sum(r["redis_commands"] for r in per_round) if mode == "calls" else None,
                }
        finally:
            if redis is not None:
                redis.stop()
    config = {"requests": args.requests, "bursts": args.bursts, "rounds": args.rounds, "connections": args.connections, "cpus": list(CPUS)}
    data = record.finish(config=config, within=WITHIN, results=results)
    for mode, r in results.items():
        print(
            f"{mode}: together/alone {r['together_over_alone_median']} (range {r['together_over_alone_range']}), "
            f"{r['workers_within']} of {r['workers_measured']} within {WITHIN:.0%}"
            + (f"; Redis commands while timed: {r['redis_commands_while_timed']}" if mode == "calls" else "")
        )
    if args.out is not None:
        write(args.out, "results", data, _markdown(data))
    return 0


def _markdown(data: dict[str, Any]) -> str:
    lines = [
        "# One server process alone on its core against two at once (in process)",
        "",
        f"Command: `{data['command']}` (started {data['started']}; load average at start {data['loadavg_at_start']}).",
        "",
        "| mode | store | worker | alone ns/call | together ns/call | together / alone |",
        "|---|---|---|---:|---:|---:|",
    ]
    for mode, r in data["results"].items():
        for rnd in r["rounds"]:
            for name, w in rnd["workers"].items():
                lines.append(
                    f"| {mode} | {r['store']} | {name} | {w['alone_ns']:.0f} | {w['together_ns']:.0f} | {w['together_over_alone']:.3f} |"
                )
    lines += ["", "| mode | together / alone, median | range | within 10 % | Redis commands while timed |", "|---|---:|---|---:|---:|"]
    for mode, r in data["results"].items():
        lo, hi = r["together_over_alone_range"]
        lines.append(
            f"| {mode} | {r['together_over_alone_median']:.3f} | {lo:.3f} – {hi:.3f} | {r['workers_within']} of {r['workers_measured']} | {r['redis_commands_while_timed'] if r['redis_commands_while_timed'] is not None else '-'} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
