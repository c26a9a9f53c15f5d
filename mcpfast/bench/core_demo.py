"""``python -m mcpfast.bench.core_demo``: a quick side-by-side of the two core implementations.

Times each operation on the realistic traffic of ``mcpfast.bench.traffic`` with both cores in
the same process (best of several short ``timeit`` runs, interleaved so that a noisy neighbour
hurts both alike) and prints a table with the speed-up. It takes about 15 seconds; the full,
statistically careful comparison is ``make bench-core``.
"""

from __future__ import annotations

import argparse
import timeit
from collections.abc import Callable
from types import ModuleType

from mcpfast.bench import traffic
from mcpfast.core import load

__all__ = ["main", "operations"]


def operations(core: ModuleType) -> dict[str, Callable[[], object]]:
    """The operations compared, each a no-argument callable on one implementation."""

    def sse() -> int:
        dec = core.SseDecoder()
        return sum(len(dec.feed(chunk)) for chunk in traffic.SSE_CHUNKS)

    def frame() -> int:
        framer = core.LineFramer()
        return sum(len(framer.feed(chunk)) for chunk in traffic.STDIO_CHUNKS)

    return {
        "decode initialize": lambda: _view(core.decode(traffic.INITIALIZE)),
        "tools/call small: decode + encode_result": lambda: traffic.route(core, traffic.CALL_SMALL),
        "tools/call small: + param(name, arguments)": lambda: traffic.handle_lazy(core, traffic.CALL_SMALL),
        "tools/call 64KB: decode + encode_result": lambda: core.encode_result(core.decode(traffic.CALL_64K).id, traffic.SMALL_RESULT),
        "encode tools/list (100 tools)": lambda: core.encode_result(1, traffic.TOOLS_LIST),
        "progress notification encode": lambda: core.encode_notification("notifications/progress", traffic.PROGRESS_PARAMS),
        "scan_reply": lambda: core.scan_reply(traffic.REPLY),
        "sse decode 1000 events": sse,
        "stdio framing 1000 lines": frame,
    }


def _view(m: object) -> tuple[object, ...]:
    return (getattr(m, "kind", None), getattr(m, "id", None), getattr(m, "method", None))


def _best(fn: Callable[[], object], budget: float) -> float:
    """Seconds per call: the best of several runs sized to take about ``budget`` each."""
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()
    number = max(1, int(number * budget / 0.2))
    return min(timer.repeat(repeat=3, number=number)) / number


def _fmt(seconds: float) -> str:
    for unit, scale in (("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:8.2f} {unit}"
    return f"{seconds / 1e-9:8.0f} ns"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mcpfast.bench.core_demo", description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=0.05, help="seconds per timing run (default 0.05)")
    args = parser.parse_args(argv)
    rust, python = load("rust"), load("python")
    rust_ops, python_ops = operations(rust), operations(python)
    print(f"mcpfast core: compiled ({rust.build_profile} build) vs pure-Python twin (orjson), same process\n")
    print(f"{'operation':45} {'python':>12} {'rust':>12} {'speed-up':>9}")
    print("-" * 81)
    for name in rust_ops:
        # Both implementations must agree before either is timed.
        if rust_ops[name]() != python_ops[name]():
            raise SystemExit(f"the two implementations disagree on {name!r}: not timing them")
        p = _best(python_ops[name], args.budget)
        r = _best(rust_ops[name], args.budget)
        print(f"{name:45} {_fmt(p):>12} {_fmt(r):>12} {p / r:8.2f}x")
    print("\nFull comparison with statistics and a plot: make bench-core (bench_results/core/).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
