"""Old and new ``mcpfast serve --transport http`` side by side, in interleaved rounds.

    python -m mcpfast.bench.ab_http --tree old=/path/to/old-checkout --tree new=. \\
        --out bench_results/ab/http.json

Each tree runs its own ``.venv`` interpreter from inside its own directory (so that tree's
package and compiled core are imported), pinned to core 0; one generator binary
(``mcpfast-load``, default: this checkout's release build) drives every tree from core 1. Each
round measures every tree for tools/call (``calls``) and for full handshake lifecycles
(``handshakes``), alternating the order between rounds so that drift in the machine's speed hits
both sides; the ratio is taken per round and its median reported, with the load average.
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

from mcpfast.bench.procs import free_port, pinned, repo_root, stop_process, wait_port, write_json

__all__ = ["main", "measure"]

RATE_KEYS = {"calls": "calls_per_second", "handshakes": "handshakes_per_second"}


def measure(tree: Path, load: Path, mode: str, *, duration: float, warmup: float, sessions: int) -> dict[str, Any]:
    """One fresh server from ``tree``, one ``mcpfast-load`` run against it: the generator's summary."""
    port = free_port()
    argv = [str(tree / ".venv" / "bin" / "python"), "-m", "mcpfast", "serve", "--transport", "http"]
    argv += ["--host", "127.0.0.1", "--port", str(port)]
    env = {**os.environ, "MCPFAST_CORE": "rust"}
    server = subprocess.Popen(pinned(argv, 0), cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port, server, timeout=30)
        count = "--sessions" if mode == "calls" else "--connections"
        gen = [str(load), mode, "--url", f"http://127.0.0.1:{port}/mcp", count, str(sessions)]
        gen += ["--duration", str(duration), "--warmup", str(warmup), "--server-pid", str(server.pid)]
        done = subprocess.run(pinned(gen, 1), capture_output=True, text=True, timeout=duration + warmup + 120)
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if not lines:
            raise RuntimeError(f"{tree}: mcpfast-load printed no summary (exit {done.returncode}): {done.stderr[-500:]}")
        summary: dict[str, Any] = json.loads(lines[-1])
        summary["exit"] = done.returncode
        return summary
    finally:
        stop_process(server)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mcpfast.bench.ab_http", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", required=True, help="LABEL=PATH of a checkout with its .venv (two or more)")
    parser.add_argument("--load", type=Path, default=repo_root() / "target" / "release" / "mcpfast-load")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=float, default=6.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=1.5)
    parser.add_argument("--sessions", type=int, default=32, help="sessions (calls) or connections (handshakes)")
    parser.add_argument("--out", type=Path, help="write every run and the medians here (JSON)")
    args = parser.parse_args(argv)
    trees = dict(t.split("=", 1) for t in args.tree)
    if len(trees) < 2:
        parser.error("give at least two --tree LABEL=PATH")
    labels = list(trees)
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {mode: {t: [] for t in labels} for mode in RATE_KEYS}
    load_start = os.getloadavg()
    for rnd in range(args.rounds):
        order = labels if rnd % 2 == 0 else labels[::-1]
        for mode, key in RATE_KEYS.items():
            for label in order:
                s = measure(Path(trees[label]), args.load, mode, duration=args.duration, warmup=args.warmup, sessions=args.sessions)
                runs[mode][label].append(
                    {"rate": s.get(key), "exit": s["exit"], "server_cpu": s.get("server_cpu"), "load": os.getloadavg()[0]}
                )
                print(
                    f"round {rnd} {mode:10s} {label:8s} {s.get(key) or 0:>10,.0f}/s  exit {s['exit']}  load {os.getloadavg()[0]:.2f}",
                    flush=True,
                )
    result: dict[str, Any] = {
        "command": shlex.join([sys.executable, "-m", "mcpfast.bench.ab_http", *(argv if argv is not None else sys.argv[1:])]),
        "trees": trees,
        "config": {"rounds": args.rounds, "duration": args.duration, "warmup": args.warmup, "sessions": args.sessions},
        "load_start": load_start,
        "load_end": os.getloadavg(),
        "runs": runs,
        "median": {mode: {t: statistics.median(r["rate"] or 0 for r in runs[mode][t]) for t in labels} for mode in RATE_KEYS},
        "ratio_to_first": ratio_to_first(runs, labels),
        "ok": all(r["exit"] == 0 for mode in runs.values() for rs in mode.values() for r in rs),
    }
    return report(result, args.out)


def ratio_to_first(runs: dict[str, dict[str, list[dict[str, Any]]]], labels: list[str]) -> dict[str, dict[str, float]]:
    """Per mode, each later label's median per-round rate ratio to the first label's (the rounds
    were interleaved, so a ratio compares two runs taken under the same load)."""
    base = labels[0]
    return {
        mode: {t: statistics.median((r["rate"] or 0) / (b["rate"] or 1) for r, b in zip(by[t], by[base], strict=True)) for t in labels[1:]}
        for mode, by in runs.items()
    }


def report(result: dict[str, Any], out: Path | None) -> int:
    """Print the summary of a side-by-side run, write it whole to ``out``; 0 when every run exited 0."""
    print(json.dumps({k: result[k] for k in ("median", "ratio_to_first", "load_start", "load_end", "ok")}, indent=1))
    if out is not None:
        write_json(out, result)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
