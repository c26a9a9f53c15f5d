"""Report the Rust-vs-Python core benchmarks.

Usage::

    python -m benchmarks.core_report BENCH_JSON OUTDIR [--command "make bench-core"]

reads a pytest-benchmark JSON file (``--benchmark-json``) produced by
``tests/bench/test_core_bench.py`` and writes

* ``OUTDIR/results.md``: one row per group with the python median, the rust median and the
  speed-up (python / rust);
* ``OUTDIR/core.png``: a horizontal bar chart of the speed-up per group (log scale) with lines at
  the 3x and 5x targets.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TARGETS = (3.0, 5.0)

# The groups with a speed-up target: python median / rust median at least this.
GROUP_TARGETS = {
    "tools/call small: decode + encode_result": 3.0,
    "tools/call 64KB: decode + encode_result": 3.0,
    "sse decode 1000": 5.0,
}


@dataclass(frozen=True)
class Row:
    group: str
    python: float | None  # median seconds
    rust: float | None

    @property
    def speedup(self) -> float | None:
        if self.python is None or self.rust is None or self.rust <= 0:
            return None
        return self.python / self.rust


def _impl_of(bench: dict[str, Any]) -> str | None:
    impl = (bench.get("extra_info") or {}).get("impl")
    if impl:
        return str(impl)
    name = str(bench.get("name", ""))
    for candidate in ("rust", "python"):
        if name.endswith(f"[{candidate}]"):
            return candidate
    return None


def load_rows(path: Path) -> list[Row]:
    """One row per benchmark group, in the order the groups first appear."""
    data = json.loads(path.read_text(encoding="utf-8"))
    medians: dict[str, dict[str, float]] = {}
    for bench in data.get("benchmarks", []):
        impl = _impl_of(bench)
        if impl is None:
            continue
        group = bench.get("group") or bench.get("name", "?")
        # A benchmark may time several operations per call (extra_info["ops"]): per operation.
        ops = int((bench.get("extra_info") or {}).get("ops", 1)) or 1
        medians.setdefault(group, {})[impl] = float(bench["stats"]["median"]) / ops
    return [Row(g, m.get("python"), m.get("rust")) for g, m in medians.items()]


def format_time(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def machine_lines(data: dict[str, Any]) -> list[str]:
    """Where and on what the numbers were taken, from pytest-benchmark's own record."""
    m = data.get("machine_info") or {}
    c = data.get("commit_info") or {}
    cpu = (m.get("cpu") or {}).get("brand_raw") or m.get("processor") or "?"
    count = (m.get("cpu") or {}).get("count", "?")
    out = [
        f"- machine: {cpu}, {count} logical CPUs, {m.get('system', '?')} {m.get('release', '')}".rstrip(),
        f"- Python {m.get('python_version', '?')} ({m.get('python_implementation', '?')})",
        f"- taken {data.get('datetime', '?')}, commit {str(c.get('id', '?'))[:12]}{' (dirty tree)' if c.get('dirty') else ''}",
    ]
    return out


def render_markdown(rows: list[Row], source: str, command: str | None = None, data: dict[str, Any] | None = None) -> str:
    lines = [
        "# Core benchmarks: Rust vs pure Python",
        "",
        f"Source: `{source}` (pytest-benchmark medians, both implementations in the same run).",
        "Speed-up = python median / rust median. Ratios are what to compare across machines;",
        "absolute times on a shared 2-core machine move from run to run.",
        "",
    ]
    if data is not None:
        lines += [*machine_lines(data), ""]
    if command:
        lines += [f"Reproduce with `{command}`.", ""]
    lines += [
        "| group | python median | rust median | speed-up (python/rust) | target |",
        "|---|---:|---:|---:|---|",
    ]
    for row in rows:
        s = row.speedup
        target = GROUP_TARGETS.get(row.group)
        verdict = ""
        if target is not None:
            verdict = f"{target:g}x: {'met' if s is not None and s >= target else 'NOT met'}"
        lines.append(
            f"| {row.group} | {format_time(row.python)} | {format_time(row.rust)} | {'n/a' if s is None else f'{s:.2f}x'} | {verdict} |"
        )
    lines.append("")
    return "\n".join(lines)


def render_chart(rows: list[Row], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    plotted = [r for r in rows if r.speedup is not None]
    fig, ax = plt.subplots(figsize=(9, 0.5 * max(len(plotted), 1) + 1.8))
    if plotted:
        labels = [r.group for r in plotted]
        values = [r.speedup for r in plotted if r.speedup is not None]
        colors = ["#2a9d8f" if v >= TARGETS[-1] else "#e9c46a" if v >= TARGETS[0] else "#e76f51" for v in values]
        ypos = list(range(len(plotted)))
        ax.barh(ypos, values, color=colors)
        ax.set_yticks(ypos, labels)
        ax.invert_yaxis()
        for y, v in zip(ypos, values, strict=True):
            ax.text(v, y, f" {v:.2f}x", va="center", fontsize=8)
        ax.set_xscale("log")
        low = min([*values, 1.0]) / 1.5
        high = max([*values, TARGETS[-1]]) * 2
        ax.set_xlim(low, high)
        ticks = [t for t in (0.1, 0.2, 0.5, 1, 2, 3, 5, 10, 20, 50, 100) if low <= t <= high]
        ax.set_xticks(ticks, [f"{t:g}x" for t in ticks])
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    else:
        ax.text(0.5, 0.5, "no group has both implementations", ha="center", va="center", transform=ax.transAxes)
        ax.set_xscale("log")
        ax.set_xlim(0.5, 20)
    ax.axvline(1.0, color="grey", linewidth=0.8)
    for target, style in zip(TARGETS, ("--", ":"), strict=True):
        ax.axvline(target, color="black", linestyle=style, linewidth=1, label=f"target {target:g}x")
    ax.set_xlabel("speed-up: python median / rust median (log scale)")
    ax.set_title("mcpfast core: Rust vs Python")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.core_report", description=__doc__.split("\n")[1])
    parser.add_argument("json", type=Path, help="pytest-benchmark JSON file")
    parser.add_argument("outdir", type=Path, help="directory for results.md and core.png")
    parser.add_argument("--command", help="the command that produced the JSON (shown in results.md)")
    args = parser.parse_args(argv)
    rows = load_rows(args.json)
    if not rows:
        print(f"no core benchmarks found in {args.json}", file=sys.stderr)
        return 1
    args.outdir.mkdir(parents=True, exist_ok=True)
    data = json.loads(args.json.read_text(encoding="utf-8"))
    markdown = render_markdown(rows, str(args.json), args.command, data)
    (args.outdir / "results.md").write_text(markdown, encoding="utf-8")
    render_chart(rows, args.outdir / "core.png")
    print(f"wrote {args.outdir / 'results.md'} and {args.outdir / 'core.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
