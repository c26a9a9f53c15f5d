"""``mcpfast compare RUN_A RUN_B``: each percentile's change from run A to run B, judged against
the runs' own noise, with an exit code for CI.

A run is a ``mcpfast bench`` folder (``summary.json``; its families matched by family and
transport) or a plain ``locust`` run's ``PREFIX_histograms.json`` (or ``PREFIX``). For each
request name both runs completed, p50, p90 and p99 of the whole run are compared (B against
A, in percent), and each change is judged by the rank test of :mod:`mcpfast.results.noise` over
the percentile's per-window values of each run's interval log: *beyond noise* when the test
rejects "the same distribution" at ``--confidence`` (default 99%, two-sided), *within noise*
when it does not, *not judged* when either run has too few windows for the test to ever reach
that confidence (a run of a few seconds, a name sent a few times). A regression is a change
beyond noise, upwards, by more than ``--max-regression`` (default 10%): a machine's drift from
one run to the next is often that large even when nothing changed, and a smaller change beyond
noise is shown but does not fail the check.

Exit code: 0 no regression; 1 a regression; 2 nothing to judge (a run unreadable, no name in
common, or no percentile with enough windows in both runs). The text names the test, the confidence and the threshold; ``compare-<a>-vs-<b>.json``
keeps every judgement, ``compare-<a>-vs-<b>.png`` both runs' percentile curves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mcpfast.locust import intervals as iv
from mcpfast.locust.histogram import Histogram
from mcpfast.locust.hlog import IntervalLog
from mcpfast.locust.units import latency_text
from mcpfast.results import files
from mcpfast.results.noise import RankTest, rank_test, smallest_p, windows

__all__ = [
    "CONFIDENCE",
    "MAX_REGRESSION",
    "PERCENTILES",
    "CompareError",
    "Comparison",
    "Judgement",
    "Run",
    "compare",
    "load",
    "render",
    "write",
]

PERCENTILES = (50.0, 90.0, 99.0)
CONFIDENCE = 0.99
MAX_REGRESSION = 0.10
BEYOND, WITHIN, NOT_JUDGED = "beyond noise", "within noise", "not judged"
TEST = "two-sided Wilcoxon-Mann-Whitney rank test over each run's per-second percentiles (interval log)"


class CompareError(Exception):
    """A run that cannot be compared (the message says why)."""


@dataclass
class Part:
    """One locust run of a run: its histograms and their interval log."""

    ok: dict[tuple[str, str], Histogram]
    log: IntervalLog | None
    duration: float | None
    start: float | None


@dataclass
class Run:
    path: Path
    label: str
    kind: str  # "bench" or "locust"
    parts: dict[str, Part]  # "family/transport" (a bench) or "run" (a locust prefix)


def _part(prefix: Path) -> Part | None:
    data = files.read_json(Path(f"{prefix}_histograms.json"))
    if not isinstance(data, dict):
        return None
    return Part(files.histograms(prefix), files.interval_log(prefix), data.get("duration_s"), data.get("start_time"))


def load(path: str | Path) -> Run:
    """A bench folder, or a locust run's ``PREFIX_histograms.json`` or ``PREFIX``.

    Raises:
        CompareError: none of those, or a capacity search or soak (nothing per name to compare).
    """
    path = Path(path)
    if path.is_dir() and (path / "summary.json").is_file():
        try:
            summary = files.load_summary(path)
        except SystemExit as exc:
            raise CompareError(str(exc)) from None
        parts = {}
        for fam in summary.get("families") or []:
            if fam.get("family") != "*" and fam.get("status") != "not run" and (part := _part(files.prefix(path, fam))) is not None:
                parts[f"{fam['family']}/{fam['transport']}"] = part
        return Run(path, path.resolve().name, "bench", parts)
    if path.is_dir() and ((path / "capacity.json").is_file() or files.is_soak(path)):
        raise CompareError(f"{path} is a capacity search or a soak: compare takes bench runs and locust runs")
    prefix = Path(str(path).removesuffix("_histograms.json"))
    part = _part(prefix)
    if part is None:
        raise CompareError(f"{path}: neither a bench folder (summary.json) nor a locust run (PREFIX_histograms.json)")
    return Run(path, prefix.name, "locust", {"run": part})


@dataclass
class Judgement:
    part: str
    type: str
    name: str
    percentile: float
    a_us: int
    b_us: int
    change: float | None  # B / A - 1
    verdict: str
    regression: bool
    test: RankTest | None = None
    windows: tuple[int, int] = (0, 0)
    why: str = ""

    def text(self) -> str:
        change = "   n/a" if self.change is None else f"{self.change:+7.0%}"
        head = f"  p{self.percentile:<4g} {latency_text(self.a_us):>9} -> {latency_text(self.b_us):<9} {change}  {self.verdict}"
        if self.test is not None:
            head += f" (p={self.test.p_value:.2g}, {self.windows[0]} and {self.windows[1]} windows)"
        elif self.why:
            head += f": {self.why}"
        return head + ("  REGRESSION" if self.regression else "")


@dataclass
class Comparison:
    a: Run
    b: Run
    confidence: float
    max_regression: float
    judgements: list[Judgement] = field(default_factory=list)
    rates: dict[tuple[str, str, str], tuple[float | None, float | None]] = field(default_factory=dict)
    only_a: list[str] = field(default_factory=list)
    only_b: list[str] = field(default_factory=list)

    @property
    def regressions(self) -> list[Judgement]:
        return [j for j in self.judgements if j.regression]

    @property
    def judged(self) -> bool:
        return any(j.verdict != NOT_JUDGED for j in self.judgements)

    @property
    def exit_code(self) -> int:
        return 1 if self.regressions else 0 if self.judged else 2

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": "mcpfast-compare",
            "a": str(self.a.path),
            "b": str(self.b.path),
            "test": TEST,
            "confidence": self.confidence,
            "max_regression": self.max_regression,
            "judgements": [{**asdict(j), "test": asdict(j.test) if j.test else None} for j in self.judgements],
            "only_a": self.only_a,
            "only_b": self.only_b,
            "exit_code": self.exit_code,
        }


def _judge(label: str, key: tuple[str, str], pa: Part, pb: Part, p: float, confidence: float, max_regression: float) -> Judgement:
    a_us, b_us = pa.ok[key].value_at_percentile(p), pb.ok[key].value_at_percentile(p)
    change = b_us / a_us - 1.0 if a_us else None
    base = Judgement(label, key[0], key[1], p, a_us, b_us, change, NOT_JUDGED, False)
    if pa.log is None or pb.log is None:
        base.why = f"run {'A' if pa.log is None else 'B'} has no interval log (.hlog; an older mcpfast)"
        return base
    sa = windows(iv.series(pa.log, [key], aggregated=False).get(key, []), p)
    sb = windows(iv.series(pb.log, [key], aggregated=False).get(key, []), p)
    base.windows = (len(sa), len(sb))
    if smallest_p(len(sa), len(sb)) >= 1.0 - confidence:
        base.why = f"{len(sa)} and {len(sb)} windows can never reach {confidence:.0%} (a longer run, or more of this request)"
        return base
    test = rank_test(sa, sb)
    assert test is not None  # both samples have windows (smallest_p said so)
    base.test = test
    base.verdict = BEYOND if test.p_value < 1.0 - confidence else WITHIN
    worse = test.median_b > test.median_a and change is not None and change > max_regression
    base.regression = base.verdict == BEYOND and worse
    return base


def compare(a: Run, b: Run, confidence: float = CONFIDENCE, max_regression: float = MAX_REGRESSION) -> Comparison:
    """Every percentile of every name the two runs share, judged."""
    out = Comparison(a, b, confidence, max_regression)
    names_a = {(part, *k) for part, pa in a.parts.items() for k, h in pa.ok.items() if h.total_count}
    names_b = {(part, *k) for part, pb in b.parts.items() for k, h in pb.ok.items() if h.total_count}
    out.only_a = sorted(f"{p} {n}" if a.kind == "bench" else n for p, _t, n in names_a - names_b)
    out.only_b = sorted(f"{p} {n}" if b.kind == "bench" else n for p, _t, n in names_b - names_a)
    for label, rtype, name in sorted(names_a & names_b):
        pa, pb = a.parts[label], b.parts[label]
        key = (rtype, name)
        out.rates[(label, rtype, name)] = tuple(  # type: ignore[assignment]  # a pair, one per run
            p.ok[key].total_count / p.duration if p.duration else None for p in (pa, pb)
        )
        out.judgements += [_judge(label, key, pa, pb, p, confidence, max_regression) for p in PERCENTILES]
    return out


def _rate(pair: Sequence[float | None]) -> str:
    a, b = pair
    if a is None or b is None:
        return ""
    change = f", {b / a - 1:+.0%}" if a else ""
    return f"  (requests/s {a:,.1f} -> {b:,.1f}{change})"


def render(c: Comparison) -> str:
    """The comparison as text: the test, each name's percentiles, the names of one run only,
    and the verdict with its exit code."""
    lines = [
        f"mcpfast compare: A = {c.a.label} ({c.a.path}), B = {c.b.label} ({c.b.path})",
        f"noise: {TEST}, {c.confidence:.0%} confidence; a regression is a change beyond noise and above "
        f"{c.max_regression:+.0%} (--max-regression)",
    ]
    seen = None
    for j in c.judgements:
        key = (j.part, j.type, j.name)
        if key != seen:
            where = f"{j.part} " if c.a.kind == "bench" else ""
            lines.append(f"{where}{j.name}{_rate(c.rates.get(key, (None, None)))}")
            seen = key
        lines.append(j.text())
    if c.only_a:
        lines.append(f"only in A (not compared): {', '.join(c.only_a)}")
    if c.only_b:
        lines.append(f"only in B (not compared): {', '.join(c.only_b)}")
    counts = {v: sum(1 for j in c.judgements if j.verdict == v) for v in (BEYOND, WITHIN, NOT_JUDGED)}
    tally = f"{counts[BEYOND]} beyond noise, {counts[WITHIN]} within noise, {counts[NOT_JUDGED]} not judged"
    if not c.judgements:
        lines.append("verdict: nothing to compare: the runs have no request name in common (exit 2)")
    elif not c.judged:
        lines.append(f"verdict: nothing could be judged ({tally}): the change is unknown, not zero (exit 2)")
    elif c.regressions:
        worst = ", ".join(f"{j.part + ' ' if c.a.kind == 'bench' else ''}{j.name} p{j.percentile:g} {j.change:+.0%}" for j in c.regressions)
        lines.append(f"verdict: REGRESSION beyond noise: {worst} ({tally}; exit 1)")
    else:
        lines.append(f"verdict: no regression beyond noise above {c.max_regression:+.0%} ({tally}; exit 0)")
    return "\n".join(lines)


def write(c: Comparison, out: Path, plot: bool = True) -> list[Path]:
    """``compare-<a>-vs-<b>.json`` (every judgement) and, with ``plot``, ``.png`` (both runs'
    percentile curves, one panel per family/transport) in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    stem = f"compare-{c.a.label}-vs-{c.b.label}"
    files.write_json(out / f"{stem}.json", c.to_dict())
    made = [out / f"{stem}.json"]
    if plot:
        from mcpfast.results import plots

        panels: dict[str, dict[str, tuple[Histogram | None, Histogram | None]]] = {
            label: {name: (pa.ok[(t, name)], c.b.parts[label].ok[(t, name)]) for t, name in sorted(set(pa.ok) & set(c.b.parts[label].ok))}
            for label, pa in c.a.parts.items()
            if label in c.b.parts
        }
        made.append(plots.compare_plot({k: v for k, v in panels.items() if v}, out / f"{stem}.png", c.a.label, c.b.label))
    return made
