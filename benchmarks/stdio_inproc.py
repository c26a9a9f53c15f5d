"""In-process stdio cost: this tree against an older one, message by message, no pipes.

    python -m benchmarks.stdio_inproc --baseline-src /work/base --out bench_results/ab/stdio_inproc.json

A worker process per tree (``stdio_inproc_worker.py``, run with ``-c`` from inside the tree it
measures, so an older checkout needs no copy of it) builds the demo app's connection, does the
handshake and then, on each request of the parent, feeds one ``tools/call echo`` line
``--messages`` times:

* ``line``: ``Connection.feed`` + ``session.data_to_send()`` per message (engine, dispatch,
  handler, reply record);
* ``engine``: the engine alone: ``session.receive`` + ``respond`` + ``data_to_send``;
* ``chunk``: ``serve_stdio``'s inner loop: ``LineFramer.feed`` of a 32-line read, ``feed``
  per line, one ``frame_lines`` of the replies per read.

Both workers are pinned to ``--cpu`` (``taskset``) and take turns burst by burst (ABBA,
``benchmarks.harness.alternate``), so
whatever else the shared machine runs hits both alike; times are CPU time (``process_time``),
wall time is recorded too. A round (a fresh pair of processes) gives the median over its
bursts of old ns / new ns, i.e. calls/s new / old; the result is the median over rounds. The
load average is recorded before and after.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.harness import ROOT, Record, alternate, head, pinned, ratios, write

__all__ = ["WORKER", "InprocWorker", "main", "markdown", "measure", "report", "result_table"]

WORKER = Path(__file__).with_name("stdio_inproc_worker.py")


class InprocWorker:
    """One worker process measuring ``tree``; ``run()`` times one burst of messages."""

    def __init__(
        self, tree: Path, mode: str, messages: int, cpu: int | None, worker: Path = WORKER, extra_env: dict[str, str] | None = None
    ) -> None:
        argv = pinned([sys.executable, "-c", worker.read_text(), mode, str(messages)], cpu)
        env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0", **(extra_env or {})}
        self.tree = tree
        self.proc = subprocess.Popen(argv, cwd=tree, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.dead = False

    def run(self) -> dict[str, Any]:
        self.start()
        return self.result()

    def start(self) -> None:
        """Start a burst (``result`` reads it): several workers' bursts may run at once."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write("go\n")
            self.proc.stdin.flush()
        except OSError:  # it died before reading: said by ``result``
            self.dead = True

    def result(self) -> dict[str, Any]:
        """The burst ``start`` began: ``cpu_ns``, ``wall_ns``, ``core``."""
        assert self.proc.stdout is not None
        line = "" if self.dead else self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the worker in {self.tree} died (exit {self.proc.wait()})")
        result: dict[str, Any] = json.loads(line)
        return result

    def close(self) -> None:
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):  # a dead worker's pipe
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def _bursts_of(workers: dict[str, InprocWorker]) -> Callable[[str, int], dict[str, Any]]:
    """What :func:`~benchmarks.harness.alternate` measures in a round: one burst of the named worker."""
    return lambda name, _burst: workers[name].run()


def _profile(tree: Path, messages: int, cpu: int | None) -> str:
    argv = pinned([sys.executable, "-c", WORKER.read_text(), "line", str(messages), "profile"], cpu)
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
    done = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True, timeout=600, check=True)
    return done.stderr


def measure(
    trees: dict[str, Path],
    *,
    mode: str = "line",
    messages: int = 4000,
    bursts: int = 15,
    rounds: int = 7,
    cpu: int | None = 1,
    worker: Path = WORKER,
    envs: dict[str, dict[str, str]] | None = None,
) -> dict[str, Any]:
    """Rounds of fresh ``old``/``new`` worker pairs, each timing ``bursts`` paired bursts (ABBA).

    ``envs``: extra environment per name (``scale_inproc`` runs one tree twice, one store each).
    ``worker`` is the worker script (run with ``-c`` in each tree; ``http_inproc`` passes its own):
    it answers each ``go`` line on stdin with one JSON line (``cpu_ns``, ``wall_ns``, ``core``).

    A round's ratio is the median of its bursts' ``old ns / new ns`` (calls/s new / old); the
    result is the median over rounds.
    """
    names = list(trees)
    per_round: dict[str, list[float]] = {n: [] for n in names}
    cpu_ratios: list[float] = []
    wall_ratios: list[float] = []
    core = ""
    for rnd in range(rounds):
        workers = {n: InprocWorker(trees[n], mode, messages, cpu, worker, (envs or {}).get(n)) for n in names}
        try:
            done = alternate(names, bursts, _bursts_of(workers), start=rnd)
        finally:
            for proc in workers.values():
                proc.close()
        core = done.results[names[0]][-1]["core"]
        for n in names:
            per_round[n].append(statistics.median(r["cpu_ns"] for r in done.results[n]))
        old, new = done.results["old"], done.results["new"]
        cpu_ratios.append(statistics.median(ratios((r["cpu_ns"] for r in old), (r["cpu_ns"] for r in new))))
        wall_ratios.append(statistics.median(ratios((r["wall_ns"] for r in old), (r["wall_ns"] for r in new))))
        print(
            f"round {rnd} {mode}: " + "  ".join(f"{n} {per_round[n][-1]:.0f} ns" for n in names) + f"  new/old {cpu_ratios[-1]:.3f}",
            file=sys.stderr,
            flush=True,
        )
    return {
        "mode": mode,
        "core": core,
        "cpu_ns_per_message": {n: [round(v, 1) for v in per_round[n]] for n in names},
        "median_cpu_ns": {n: round(statistics.median(per_round[n]), 1) for n in names},
        "ratio_new_over_old_per_round": [round(r, 3) for r in cpu_ratios],
        "ratio_new_over_old": round(statistics.median(cpu_ratios), 3),
        "wall_ratio_new_over_old": round(statistics.median(wall_ratios), 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.stdio_inproc", description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline-src", type=Path, required=True, help="the older source tree (with its compiled core)")
    parser.add_argument("--new-src", type=Path, default=ROOT, help="the tree under test (default: this checkout)")
    parser.add_argument("--modes", default="line,chunk,engine", help="comma-separated: line, chunk, engine")
    parser.add_argument("--messages", type=int, default=4000, help="messages per burst")
    parser.add_argument("--bursts", type=int, default=15, help="paired bursts per round (one old, one new)")
    parser.add_argument("--rounds", type=int, default=7, help="rounds, each with a fresh pair of processes")
    parser.add_argument("--cpu", type=int, default=1, help="CPU every worker is pinned to (-1: no pinning)")
    parser.add_argument("--profile", action="store_true", help="print a cProfile table of each tree's line loop and exit")
    parser.add_argument("--out", type=Path, help="JSON results file (a .md beside it)")
    args = parser.parse_args(argv)
    cpu = args.cpu if args.cpu >= 0 else None
    trees = {"old": args.baseline_src.resolve(), "new": args.new_src.resolve()}
    if args.profile:
        for name, tree in trees.items():
            print(f"== {name}: {tree}\n{_profile(tree, args.messages, cpu)}")
        return 0
    record = Record("stdio_inproc", argv)
    results = [
        measure(trees, mode=mode, messages=args.messages, bursts=args.bursts, rounds=args.rounds, cpu=cpu) for mode in args.modes.split(",")
    ]
    config = {"messages": args.messages, "bursts": args.bursts, "rounds": args.rounds, "cpu": args.cpu}
    data = record.finish(trees={n: str(t) for n, t in trees.items()}, config=config, results=results)
    report(data, args.out, _markdown)
    return 0


def report(data: dict[str, Any], out: Path | None, markdown: Callable[[dict[str, Any]], str]) -> None:
    """Print each mode's ratio; with ``out``, write the JSON there and ``markdown(data)`` beside it."""
    for r in data["results"]:
        print(f"{r['mode']}: new/old per second {r['ratio_new_over_old']} per round {r['ratio_new_over_old_per_round']}")
    if out is not None:
        write(out.parent, out.stem, data, markdown(data))


def markdown(data: dict[str, Any], title: str, setup: str, table: list[str]) -> str:
    """The Markdown of an in-process run: title, command and load averages, ``setup``, the ``table``."""
    return "\n".join([f"# {title}", "", head(data), "", setup, "", *table]) + "\n"


def _markdown(data: dict[str, Any]) -> str:
    cfg, trees = data["config"], data["trees"]
    setup = (
        f"Trees: old `{trees['old']}`, new `{trees['new']}`. Every worker pinned to CPU {cfg['cpu']}; {cfg['rounds']} rounds, "
        f"each a fresh pair of processes timing {cfg['bursts']} paired bursts of {cfg['messages']} messages in ABBA order "
        "(a round's ratio: the median over its bursts of old ns / new ns)."
    )
    return markdown(
        data,
        "stdio in process: new tree vs old, CPU ns per tools/call echo",
        setup,
        result_table(data["results"], unit="msg", rate="calls/s"),
    )


def result_table(results: list[dict[str, Any]], *, unit: str, rate: str) -> list[str]:
    """The Markdown table of ``measure`` results (one row per mode), ``unit`` timed, ``rate`` compared."""
    lines = [
        f"| mode | core | old ns/{unit} (median) | new ns/{unit} (median) | {rate} new/old (median of rounds) | per round | wall-clock ratio |",
        "| --- | --- | ---: | ---: | ---: | --- | ---: |",
    ]
    for r in results:
        m = r["median_cpu_ns"]
        lines.append(
            f"| {r['mode']} | {r['core']} | {m['old']:,.0f} | {m['new']:,.0f} | {r['ratio_new_over_old']} | "
            f"{r['ratio_new_over_old_per_round']} | {r['wall_ratio_new_over_old']} |"
        )
    return lines


if __name__ == "__main__":
    sys.exit(main())
