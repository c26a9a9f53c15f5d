"""In-process HTTP cost: this tree's native HTTP server connection against an older tree's.

    python -m benchmarks.http_inproc --baseline-src /work/base --rounds 7 --out bench_results/ab/http_inproc.json

The HTTP twin of ``stdio_inproc`` (same pairing, timing and ratios, its ``measure``): a worker
process per tree (``http_inproc_worker.py``, run with ``-c`` from inside the tree it measures)
serves the demo app through that tree's ``http_server._Connection`` on a fake transport that
keeps the written bytes, so no socket, kernel or load generator is timed, only the server's
parsing, the transport's ``handle``, the engine and the reply rendering:

* ``calls``: one session made first, then ``--requests`` keep-alive ``POST /mcp``
  ``tools/call echo`` requests with the session headers per burst (each answer checked for 200);
* ``stateless``: ``--requests`` keep-alive 2026-07-28 ``tools/call echo`` requests, no session
  (the version in ``_meta`` and the ``Mcp-Method``/``Mcp-Name`` headers);
* ``handshakes``: per cycle ``initialize``, ``notifications/initialized`` and ``DELETE``.

The demo's ``echo`` is a sync tool: in both this tree and 1d441ce every answer here is written
from inside ``data_received`` (the transport's ``handle`` returns a reply tuple). The worker
still runs each burst in an event loop and yields to it while no answer is written, so a tree
that defers an answer to a task is measured too, not hung.

Both workers are pinned to ``--cpu`` and take turns burst by burst (ABBA); times are CPU time
(``process_time``). A round's ratio is the median over its bursts of old ns / new ns (i.e.
requests/s new / old); the result is the median over rounds. The load average is recorded.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from benchmarks.harness import ROOT, Record
from benchmarks.stdio_inproc import markdown, report, result_table
from benchmarks.stdio_inproc import measure as _measure

__all__ = ["WORKER", "add_run_options", "main", "measure"]

WORKER = Path(__file__).with_name("http_inproc_worker.py")
MODES = ("calls", "stateless", "handshakes")
DEFAULT_MODES = ("calls", "handshakes")


def measure(trees: dict[str, Path], *, mode: str = "calls", requests: int = 5000, **options: Any) -> dict[str, Any]:
    """``stdio_inproc.measure`` (same ``bursts``, ``rounds``, ``cpu``, ``envs``) with the HTTP worker: ns
    per request (``calls``) or per cycle (``handshakes``).

    ``envs`` per name: ``MCPFAST_INPROC_STORE`` (a store URL; default memory) and
    ``MCPFAST_INPROC_CONNECTIONS`` (connections served side by side; default 1)."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r} (one of {', '.join(MODES)})")
    return _measure(trees, mode=mode, messages=requests, worker=WORKER, **options)


def add_run_options(parser: argparse.ArgumentParser, *, requests: int, cpu: int) -> None:
    """The options every in-process HTTP A/B takes (this one, ``scale_inproc``)."""
    parser.add_argument(
        "--modes", default=",".join(DEFAULT_MODES), help="comma-separated: calls, stateless, handshakes (default: calls,handshakes)"
    )
    parser.add_argument("--requests", type=int, default=requests, help="calls per burst (handshakes: a quarter as many cycles)")
    parser.add_argument("--bursts", type=int, default=15, help="paired bursts per round (one of each side)")
    parser.add_argument("--rounds", type=int, default=7, help="rounds, each with a fresh pair of processes")
    parser.add_argument("--cpu", type=int, default=cpu, help="CPU every worker is pinned to (-1: no pinning)")
    parser.add_argument("--out", type=Path, help="JSON results file (a .md beside it)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.http_inproc", description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline-src", type=Path, required=True, help="the older source tree (with its compiled core)")
    parser.add_argument("--new-src", type=Path, default=ROOT, help="the tree under test (default: this checkout)")
    add_run_options(parser, requests=5000, cpu=1)
    args = parser.parse_args(argv)
    cpu = args.cpu if args.cpu >= 0 else None
    trees = {"old": args.baseline_src.resolve(), "new": args.new_src.resolve()}
    record = Record("http_inproc", argv)
    results = []
    for mode in args.modes.split(","):
        requests = args.requests if mode != "handshakes" else max(1, args.requests // 4)
        results.append(measure(trees, mode=mode, requests=requests, bursts=args.bursts, rounds=args.rounds, cpu=cpu))
    config = {"requests": args.requests, "bursts": args.bursts, "rounds": args.rounds, "cpu": args.cpu}
    report(record.finish(trees={n: str(t) for n, t in trees.items()}, config=config, results=results), args.out, _markdown)
    return 0


def _markdown(data: dict[str, Any]) -> str:
    cfg, trees = data["config"], data["trees"]
    setup = (
        f"Trees: old `{trees['old']}`, new `{trees['new']}`. Each tree's native HTTP server connection "
        "(`http_server._Connection.data_received`) on a fake transport, demo app, sync `echo` tool. "
        f"Every worker pinned to CPU {cfg['cpu']}; {cfg['rounds']} rounds, each a fresh pair of processes timing "
        f"{cfg['bursts']} paired bursts in ABBA order ({cfg['requests']} calls per burst; a quarter as many "
        "initialize + initialized + DELETE cycles for handshakes). A round's ratio: the median over its bursts "
        "of old ns / new ns, i.e. per second new / old."
    )
    title = "HTTP in process: new tree vs old, CPU ns per tools/call (calls) or per handshake cycle (handshakes)"
    return markdown(data, title, setup, result_table(data["results"], unit="unit", rate="per second"))


if __name__ == "__main__":
    sys.exit(main())
