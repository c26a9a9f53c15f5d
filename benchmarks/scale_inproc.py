"""In-process cost of the Redis session store: this tree's native HTTP server with ``--store
memory`` against the same tree with ``--store redis://…``, request by request, no HTTP socket.

    python -m benchmarks.scale_inproc --rounds 7 --out bench_results/scale/inproc.json

The store twin of ``http_inproc`` (its worker, ``stdio_inproc``'s ABBA pairing and ratios): two
worker processes of one tree, one per store, pinned to one CPU and timed burst by burst in
turn, CPU time (``process_time``). The Redis worker talks to a real ``redis-server`` started for
the run (no persistence, pinned to the other CPU), so its CPU time holds everything the store
costs this process: the per-request checks on the hot path, the group-committed round trips
(packing, socket writes and reads, reply parsing), the pub/sub messages, the futures. What
neither worker pays is the HTTP socket (the same bytes either way).

* ``calls``: ``tools/call echo`` on ``--connections`` sessions (one request in flight each);
* ``handshakes``: ``initialize`` + ``initialized`` + ``DELETE`` on ``--connections``
  connections side by side, so the store's group commit sees that many at once.

A round's figure is the median over its bursts of Redis ns / memory ns (the Redis store's CPU
per operation over the memory store's); the result is the median over rounds.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.harness import ROOT, Record, write
from benchmarks.http_inproc import add_run_options, measure
from benchmarks.scale import Redis
from benchmarks.stdio_inproc import markdown

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scale_inproc", description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", type=Path, default=ROOT, help="the tree measured (default: this checkout)")
    parser.add_argument("--connections", type=int, default=32, help="connections served side by side")
    add_run_options(parser, requests=6400, cpu=0)  # redis-server on CPU 1
    args = parser.parse_args(argv)
    tree = args.src.resolve()
    cpu = args.cpu if args.cpu >= 0 else None
    record = Record("scale_inproc", argv)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        redis = Redis(Path(tmp))  # pinned to the generator's CPU (1): the workers are on 0 by default
        try:
            common = {"MCPFAST_INPROC_CONNECTIONS": str(args.connections)}
            # "old" is the baseline of stdio_inproc's ratio (old ns / new ns): memory / Redis
            envs = {"old": common, "new": {**common, "MCPFAST_INPROC_STORE": redis.url}}
            for mode in args.modes.split(","):
                requests = args.requests if mode == "calls" else max(args.connections, args.requests // 4)
                before = redis.commands()
                result = measure(
                    {"old": tree, "new": tree}, mode=mode, requests=requests, bursts=args.bursts, rounds=args.rounds, cpu=cpu, envs=envs
                )
                result = _as_stores(result)
                result["redis_commands"] = redis.commands() - before - 1  # the Redis worker's (an independent count)
                results.append(result)
        finally:
            redis.stop()
    config = {"requests": args.requests, "connections": args.connections, "bursts": args.bursts, "rounds": args.rounds, "cpu": args.cpu}
    data = record.finish(trees={"memory": str(tree), "redis": str(tree)}, config=config, results=results)
    for r in results:
        print(f"{r['mode']}: Redis/memory CPU per op {r['redis_over_memory']} per round {r['redis_over_memory_per_round']}")
    if args.out is not None:
        write(args.out.parent, args.out.stem, data, _markdown(data))
    return 0


def _as_stores(result: dict[str, Any]) -> dict[str, Any]:
    """``stdio_inproc``'s old/new result in this bench's words: memory/redis, and Redis over memory."""
    per_round = result["ratio_new_over_old_per_round"]
    return {
        "mode": result["mode"],
        "core": result["core"],
        "cpu_ns_per_op": {"memory": result["cpu_ns_per_message"]["old"], "redis": result["cpu_ns_per_message"]["new"]},
        "median_cpu_ns": {"memory": result["median_cpu_ns"]["old"], "redis": result["median_cpu_ns"]["new"]},
        "redis_over_memory_per_round": [round(1 / r, 3) for r in per_round],
        "redis_over_memory": round(1 / result["ratio_new_over_old"], 3),
        "wall_redis_over_memory": round(1 / result["wall_ratio_new_over_old"], 3),
    }


def _markdown(data: dict[str, Any]) -> str:
    cfg = data["config"]
    setup = (
        f"Tree `{data['trees']['memory']}`: one worker per store serving the demo app through the native HTTP "
        f"server connection on a fake transport, {cfg['connections']} connections side by side; the Redis worker "
        f"on a real `redis-server` (the other CPU). Workers pinned to CPU {cfg['cpu']}; {cfg['rounds']} rounds of "
        f"{cfg['bursts']} paired bursts (ABBA), {cfg['requests']} calls per burst, a quarter as many handshake cycles. "
        "CPU time of the worker process."
    )
    table = [
        "| scenario | memory ns/op | Redis ns/op | Redis / memory (median of rounds) | rounds | Redis commands in the run |",
        "|---|---:|---:|---:|---|---:|",
    ]
    for r in data["results"]:
        rounds = ", ".join(f"{x:.3f}" for x in r["redis_over_memory_per_round"])
        table.append(
            f"| {r['mode']} | {r['median_cpu_ns']['memory']:,.0f} | {r['median_cpu_ns']['redis']:,.0f} | "
            f"**{r['redis_over_memory']:.3f}x** | {rounds} | {r['redis_commands']:,} |"
        )
    return markdown(data, "The Redis session store in process: CPU per tools/call and per handshake, Redis / memory", setup, table)


if __name__ == "__main__":
    sys.exit(main())
