"""Two or more sides of ``mcpfast serve --transport http`` + ``mcpfast-load``, in alternating rounds.

    python -m benchmarks.ab_http --tree old=/path/to/old-checkout --tree new=. --out bench_results/ab/http.json
    python -m benchmarks.ab_http --bin old=/tmp/mcpfast-load.old --bin new=target/release/mcpfast-load \\
        --modes calls handshakes churn --out bench_results/swarm/load_front/ab.json
    python -m benchmarks.ab_http --bin old=... --bin new=... --server mock --modes calls handshakes churn

A side is a source tree (its ``.venv`` interpreter, run from inside the tree so that its package
and compiled core are imported) and a generator binary (``mcpfast-load``): either several
``--tree`` with one ``--load`` (old and new server code), or several ``--bin`` with one tree
(old and new generator). Every run starts a fresh server pinned to the server core and runs the
side's generator from the generator core; each round measures every side in every mode
(``calls``: tools/call on ``--sessions`` sessions; ``handshakes``: full lifecycles on as many
connections; ``churn``: ``--cycles`` create-and-delete cycles), the order reversed every other
round, so that drift in the machine's speed hits every side alike. The ratio to the first side
is taken per round and its median reported, with the load average. ``--server mock`` puts the
in-repo Rust mock responder in place of ``mcpfast serve``: the server is then not the bottleneck,
and the figures are the generators' own.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from benchmarks.harness import ROOT, SERVER_CPU, Record, alternate, medians, pinned, ratios, spread, write
from benchmarks.http_peers import LOAD_BIN, failure_count, measure_rate
from benchmarks.swarm_native import mock_server
from mcpfast.bench.procs import ServerProcess, free_port

__all__ = ["RATE_KEYS", "main", "measure"]

RATE_KEYS = {"calls": "calls_per_second", "handshakes": "handshakes_per_second", "churn": "cycles_per_second"}
LATENCY_KEY = {"calls": "tools/call", "handshakes": "initialize", "churn": "initialize"}


def tree_server(tree: Path) -> ServerProcess:
    """``mcpfast serve --transport http`` of ``tree`` (its own interpreter, package and core), pinned, not started."""
    port = free_port()
    python = tree / ".venv" / "bin" / "python"
    # not procs.reference_argv: an older tree's CLI may lack the options it adds
    argv = pinned([str(python), "-m", "mcpfast", "serve", "--transport", "http", "--host", "127.0.0.1", "--port", str(port)], SERVER_CPU)
    env = {**os.environ, "MCPFAST_CORE": "rust", "PYTHONPATH": str(tree)}
    return ServerProcess(f"mcpfast serve ({tree})", argv, "127.0.0.1", port, env=env, cwd=tree)


def generator_args(mode: str, opts: argparse.Namespace) -> list[str]:
    if mode == "churn":
        return ["--cycles", str(opts.cycles), "--connections", str(opts.sessions), "--report-every", str(max(1, opts.cycles // 4))]
    count = "--sessions" if mode == "calls" else "--connections"
    return [count, str(opts.sessions), "--duration", str(opts.duration), "--warmup", str(opts.warmup)]


def measure(tree: Path, binary: Path, mode: str, opts: argparse.Namespace) -> dict[str, Any]:
    """One fresh server from ``tree``, one ``binary`` run against it: the figures of that run."""
    with mock_server(0) if opts.server == "mock" else tree_server(tree).start(timeout=30) as server:
        s = measure_rate(server, mode, generator_args(mode, opts), opts.duration + opts.warmup + 120, binary=binary)
    lat = (s.get("latency_us") or {}).get(LATENCY_KEY[mode]) or {}
    gen = s.get("generator_cpu") or {}
    return {
        "rate": s.get(RATE_KEYS[mode]),
        "p50_us": lat.get("p50"),
        "p99_us": lat.get("p99"),
        "generator_window_share": gen.get("window_share_of_one_core"),
        "server_us_per_op": (s.get("server_cpu") or {}).get("us_per_operation"),
        "failures": failure_count(s),
        "load": os.getloadavg()[0],
        "command": s["command"],
    }


def _sides(parser: argparse.ArgumentParser, opts: argparse.Namespace) -> dict[str, tuple[Path, Path]]:
    """``{label: (tree, generator binary)}`` from ``--tree``/``--bin`` (exactly one of them given twice or more)."""
    trees = dict(t.split("=", 1) for t in opts.tree or [])
    bins = dict(b.split("=", 1) for b in opts.bin or [])
    if len(trees) >= 2 and len(bins) <= 1:
        binary = Path(next(iter(bins.values()))) if bins else opts.load
        return {label: (Path(tree).resolve(), binary) for label, tree in trees.items()}
    if len(bins) >= 2 and len(trees) <= 1:
        tree = Path(next(iter(trees.values()))).resolve() if trees else ROOT
        return {label: (tree, Path(binary)) for label, binary in bins.items()}
    parser.error("give two or more --tree LABEL=PATH (one generator) or two or more --bin LABEL=PATH (one tree)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ab_http", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", help="LABEL=PATH of a checkout with its .venv")
    parser.add_argument("--bin", action="append", help="LABEL=PATH of an mcpfast-load binary")
    parser.add_argument("--load", type=Path, default=LOAD_BIN, help="the generator of every --tree side")
    parser.add_argument("--server", choices=("reference", "mock"), default="reference", help="the tree's mcpfast serve, or the Rust mock")
    parser.add_argument("--modes", nargs="+", default=["calls", "handshakes"], choices=list(RATE_KEYS))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=float, default=6.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=1.5)
    parser.add_argument("--sessions", type=int, default=32, help="sessions (calls) or connections (handshakes, churn)")
    parser.add_argument("--cycles", type=int, default=20000, help="churn: create-and-delete cycles per run")
    parser.add_argument("--out", type=Path, help="write every run and the medians here (JSON)")
    opts = parser.parse_args(argv)
    sides = _sides(parser, opts)
    labels = list(sides)
    record = Record("ab_http", argv, lock=True)

    def run(label: tuple[str, str], rnd: int) -> dict[str, Any]:
        mode, side = label
        r = measure(*sides[side], mode, opts)
        print(f"round {rnd} {mode:10s} {side:8s} {r['rate'] or 0:>10,.0f}/s  failures {r['failures']}  load {r['load']:.2f}", flush=True)
        return r

    done = alternate([(mode, side) for mode in opts.modes for side in labels], opts.rounds, run)
    runs = {mode: {side: done.results[(mode, side)] for side in labels} for mode in opts.modes}
    result = record.finish(
        sides={label: {"tree": str(tree), "load": str(binary)} for label, (tree, binary) in sides.items()},
        config={k: opts.__dict__[k] for k in ("server", "modes", "rounds", "duration", "warmup", "sessions", "cycles")},
        runs=runs,
        median={mode: {side: medians(rs, ("rate", "p50_us", "p99_us")) for side, rs in by.items()} for mode, by in runs.items()},
        ratio_to_first={
            mode: {side: spread(ratios((r["rate"] for r in by[side]), (r["rate"] for r in by[labels[0]]))) for side in labels[1:]}
            for mode, by in runs.items()
        },
        ok=all(r["failures"] == 0 for by in runs.values() for rs in by.values() for r in rs),
    )
    for mode, by in result["ratio_to_first"].items():
        for side, s in by.items():
            print(f"{mode}: {side}/{labels[0]} median {s['median']} per round {s['per_round']}")
    if opts.out is not None:
        write(opts.out.parent, opts.out.stem, result)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
