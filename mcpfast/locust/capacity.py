"""The capacity search: the highest open-model arrival rate a server holds within an SLO.

Pure logic, no Locust and no I/O: :class:`Search` says which rate each step offers and ends the
search; :func:`judge` turns one step's steady window (:class:`Window`) into a :class:`Verdict`;
:func:`sentence` says what broke first. The Locust shape that runs the steps
(:mod:`mcpfast.locust.capacity_shape`) and ``mcpfast capacity`` sit on top.

How a search goes:

* each step offers one arrival rate in the open model (latency from the intended send time, so
  a server's queue shows as latency, not as fewer samples), held for a warm-up that is discarded
  and then a steady window that is judged;
* the rate doubles from ``start`` until a step fails, then bisects between the last step that
  passed and the first that failed until they are within ``resolution`` of each other;
* a step fails when an SLO clause fails on its steady window, when the rate the server achieved
  falls short of the one offered (its queue grows), or when requests failed (unless the SLO sets
  its own bound on failures);
* a failed step whose generator ran out of CPU, or whose native engine queued 1% or more of its
  arrivals more than 10 ms late (its own schedule, whatever the server did) while the server
  answered all but at most as many, says nothing about the server: the search stops there as
  inconclusive and never reports the generator's limit as the server's;
* the whole search is bounded in time; when the time runs out before the resolution is
  reached, the answer is the bracket (last good, first bad) it reached.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from mcpfast.locust.histogram import Histogram, HistogramSet
from mcpfast.locust.thresholds import Threshold, ThresholdError, measure, parse
from mcpfast.locust.units import latency_text

__all__ = [
    "FAILURE_METRICS",
    "FAMILIES",
    "GENERATOR_BEHIND",
    "GENERATOR_BUSY",
    "SETUP_NAMES",
    "Outcome",
    "Search",
    "SearchSettings",
    "ServerSample",
    "StepRecord",
    "Unit",
    "Verdict",
    "Window",
    "judge",
    "parse_slo",
    "sentence",
]

FAMILIES = ("tools_call", "handshake", "session_churn", "sse_streaming", "mixed")
"""The families a search can run (``mixed``: the mixed locustfile and workload files)."""
GENERATOR_BUSY = 0.9  # share of its CPU at which a generator process or engine thread set the pace
GENERATOR_BEHIND = 0.01  # share of a window's arrivals its pacers queued late at which the generator set the pace
FAILURE_METRICS = ("failures", "fail_ratio")  # an SLO clause on these replaces the default "no failures"
PERCENTILES = (50.0, 90.0, 99.0, 99.9)
GROWTH_FLOOR_US = 2000  # a median that grows less than this through a window is noise, not a queue
GROWTH_MIN_SAMPLES = 20  # per half: fewer say nothing of a trend
GROWTH_SHORTFALL = 0.99  # and only while less than this share of the offered rate completes


@dataclass(frozen=True)
class SearchSettings:
    """The search's bounds; every value is checked by :meth:`check`."""

    start: float = 50.0  # the first step's offered rate, per second
    max_rate: float = 1_000_000.0  # never offer more (a deployed server's guard)
    resolution: float = 0.05  # stop bisecting when (first bad - last good) / last good <= this
    warmup_s: float = 2.0
    steady_s: float = 5.0
    max_time_s: float = 180.0  # the whole search, steps and their gaps
    min_achieved: float = 0.97  # achieved / offered below this: the server fell behind
    stop_on_failure: bool = False  # end at the first failed step (no bisection above it)

    def check(self) -> SearchSettings:
        """Raises ValueError naming the first setting out of its range."""
        finite = {k: getattr(self, k) for k in ("start", "max_rate", "resolution", "warmup_s", "steady_s", "max_time_s", "min_achieved")}
        for name, value in finite.items():
            if not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"capacity search: {name} must be a finite number, got {value!r}")
        if self.start <= 0:
            raise ValueError(f"capacity search: the start rate must be above 0, got {self.start:g}")
        if self.max_rate < self.start:
            raise ValueError(f"capacity search: the maximum rate {self.max_rate:g}/s is below the start rate {self.start:g}/s")
        if not 0 < self.resolution < 1:
            raise ValueError(f"capacity search: the resolution must be in (0, 1), got {self.resolution:g}")
        if self.warmup_s < 0:
            raise ValueError(f"capacity search: the warm-up must be 0 s or more, got {self.warmup_s:g}")
        if self.steady_s < 1:
            raise ValueError(f"capacity search: the steady window must be at least 1 s, got {self.steady_s:g}")
        if self.max_time_s < self.step_s:
            raise ValueError(f"capacity search: the time bound {self.max_time_s:g} s is shorter than one step ({self.step_s:g} s)")
        if not 0 < self.min_achieved <= 1:
            raise ValueError(f"capacity search: the achieved share must be in (0, 1], got {self.min_achieved:g}")
        return self

    @property
    def step_s(self) -> float:
        return self.warmup_s + self.steady_s


def parse_slo(texts: list[str], names: set[str] | None = None) -> list[Threshold]:
    """The SLO's clauses, each in the ``--mcp-threshold`` grammar.

    ``names``: the request names the workload will send, when known; a clause naming another
    is refused (it could never be measured). Raises ThresholdError naming the clause.
    """
    if not texts:
        raise ThresholdError("capacity search: no SLO given (e.g. --mcp-slo 'tools/call:echo p99 < 5ms')")
    clauses = []
    for text in texts:
        t = parse(text)
        if t.metric in ("rps", "requests"):
            raise ThresholdError(f"SLO {text!r}: {t.metric} is what the search finds, not a bound it can hold each step to")
        if names is not None and t.name is not None and t.name not in names:
            known = ", ".join(sorted(names)) or "none"
            raise ThresholdError(f"SLO {text!r}: no step sends a request named {t.name!r} (this workload sends: {known})")
        clauses.append(t)
    return clauses


SETUP_NAMES = frozenset(
    {
        "initialize",
        "notifications/initialized",
        "server/discover",
        "DELETE",
        "connect",
        "tls:handshake",
        "GET:open",
        "GET:event",
        "GET:405",
        "subscriptions/listen:ack",
        "Retry-After wait",
        "progress:first-event",
        "progress:gap",
        "sse:first-event",
        "sse:gap",
        "cycle",
    }
)
"""Rows of a session's set-up, its streams' events or its transport, and the handshake families'
whole cycle: never the search's unit unless named (each is no arrival of its own)."""


@dataclass(frozen=True)
class Unit:
    """What one arrival of the search is, and the rows that count it.

    ``names``: the rows that complete an arrival (``tools/call:echo``, or ``initialize`` for new
    sessions); None: every row but a session's set-up and transport rows (a workload's mix).
    """

    label: str  # "calls/s", "sessions/s", "requests/s"
    names: frozenset[str] | None = None

    def counts(self, name: str) -> bool:
        return name in self.names if self.names is not None else name not in SETUP_NAMES


@dataclass
class ServerSample:
    """What the server's side said over one steady window (None: not known)."""

    cpu: float | None = None  # share of one core, over the window
    rss_bytes: int | None = None  # at the window's end
    sessions_open: int | None = None  # at the window's end
    alive: bool = True


@dataclass
class Window:
    """One step's steady window, as the generator measured it (every process merged)."""

    offered: float  # arrivals per second asked for
    seconds: float  # the window's length on the generator's clock
    ok: HistogramSet  # successes, µs from the intended send time
    failed: HistogramSet
    reasons: dict[str, int] = field(default_factory=dict)  # failure reason -> count
    dropped: int = 0  # arrivals the generator's queue had no room for
    behind: int = 0  # arrivals the generator's own pacers queued late (the native engine's ``behind``)
    generator_cpu: float = 0.0  # the busiest generator process's or engine thread's CPU share
    server: ServerSample = field(default_factory=ServerSample)
    # every request of the window's first and second half (successes and failures), for the
    # trend of its latency: a queue that grows shows as a later half slower than the earlier
    halves: tuple[HistogramSet, HistogramSet] | None = None

    def count(self, unit: Unit | None) -> tuple[int, int]:
        """(completed, failed) requests of the search's unit (every request: None)."""
        done = fail = 0
        for (_, name), h in self.ok.items():
            if unit is None or unit.counts(name):
                done += h.total_count
        for (_, name), h in self.failed.items():
            if unit is None or unit.counts(name):
                fail += h.total_count
        return done + fail, fail

    def achieved(self, unit: Unit) -> float:
        return self.count(unit)[0] / self.seconds if self.seconds > 0 else 0.0

    def summary_data(self) -> dict[str, Any]:
        """The window in the summary-JSON shape the threshold module measures."""
        return {
            "histograms": self.ok.to_dict()["histograms"],
            "failed_histograms": self.failed.to_dict()["histograms"],
            "duration_s": self.seconds,
        }

    def latency(self, unit: Unit) -> Histogram:
        """Successes and failures of the unit, merged (a slow failure is not hidden)."""
        return _unit_latency((self.ok, self.failed), unit)

    def growth(self, unit: Unit) -> tuple[int, int] | None:
        """(p50 of the first half, p50 of the second) in µs when the median latency of the
        unit grew through the window by more than a quarter of what it was in its first half
        and by at least ``GROWTH_FLOOR_US``: the server's queue grows; None otherwise."""
        if self.halves is None:
            return None
        first, second = (_unit_latency((half,), unit) for half in self.halves)
        if first.total_count < GROWTH_MIN_SAMPLES or second.total_count < GROWTH_MIN_SAMPLES:
            return None
        a, b = first.value_at_percentile(50.0), second.value_at_percentile(50.0)
        return (a, b) if b - a > max(GROWTH_FLOOR_US, a // 4) else None


def _unit_latency(sets: tuple[HistogramSet, ...], unit: Unit) -> Histogram:
    out = Histogram()
    for hset in sets:
        for (_, name), h in hset.items():
            if unit.counts(name):
                out.merge(h)
    return out


@dataclass
class Verdict:
    """One step judged: ``passed``; else what failed, each a short phrase with numbers."""

    passed: bool
    inconclusive: bool = False
    reasons: list[str] = field(default_factory=list)
    clauses: list[dict[str, Any]] = field(default_factory=list)  # every SLO clause, measured
    achieved: float = 0.0
    kind: str = "pass"  # pass | slo | rate | failures | server | generator

    @property
    def label(self) -> str:
        return "inconclusive" if self.inconclusive else ("pass" if self.passed else "fail")


def _show_clause_value(t: Threshold, value: float) -> str:
    if t.is_latency:
        return latency_text(value)
    if t.metric == "fail_ratio":
        return f"{value * 100:.3g}%"
    return f"{value:g}"


def judge(window: Window, slo: list[Threshold], unit: Unit, min_achieved: float = SearchSettings.min_achieved) -> Verdict:
    """Judge one steady window against the SLO, the offered rate (``min_achieved`` of it must
    complete) and the failures."""
    from mcpfast.locust.thresholds import OPS

    data = window.summary_data()
    total, failures = window.count(None)
    achieved = window.achieved(unit)
    verdict = Verdict(passed=True, achieved=achieved)
    kinds: list[str] = []
    if not window.server.alive:
        verdict.reasons.append("the server exited")
        kinds.append("server")
    for t in slo:
        value = measure(t, data)
        passed = value is not None and OPS[t.op](float(value), t.value)
        verdict.clauses.append({"slo": t.text, "measured": value, "passed": passed})
        if passed:
            continue
        if value is None:
            verdict.reasons.append(f"{t.text}: nothing to measure (no {t.name or 'request'} completed)")
        else:
            shown, bound = _show_clause_value(t, value), _show_clause_value(t, t.value)
            what = f"{t.name + ' ' if t.name else ''}{'fail%' if t.metric == 'fail_ratio' else t.metric}"
            times = f", {value / t.value:.2g}x" if t.is_latency and t.value > 0 else ""
            verdict.reasons.append(f"{what} read {shown} (SLO {t.op} {bound}{times})")
        kinds.append("slo")
    if failures and not any(t.metric in FAILURE_METRICS for t in slo):
        top = sorted(window.reasons.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
        named = "; ".join(f"{reason} ({n:,})" for reason, n in top) if top else "no reason given"
        verdict.reasons.append(f"{failures:,} of {total:,} requests failed: {named}")
        kinds.append("failures")
    short = achieved < window.offered * min_achieved
    if short or window.dropped:
        dropped = f", {window.dropped:,} arrivals dropped" if window.dropped else ""
        verdict.reasons.append(f"achieved {achieved:,.0f}/s of {window.offered:,.0f}/s offered{dropped}")
        kinds.append("rate")
    # a median that rises through the window is a growing queue only while the server also
    # falls short of the offered rate: a stall it then catches up on is not one
    grew = window.growth(unit) if achieved < window.offered * GROWTH_SHORTFALL else None
    if grew is not None:
        a, b = grew
        verdict.reasons.append(
            f"the median latency grew from {latency_text(a)} to {latency_text(b)} through the window (the server's queue grows)"
        )
        kinds.append("rate")
    if kinds:
        verdict.passed = False
        verdict.kind = kinds[0]
        arrivals = window.offered * window.seconds
        if window.generator_cpu >= GENERATOR_BUSY:
            verdict.inconclusive = True
            verdict.kind = "generator"
            verdict.reasons.insert(
                0, f"the generator was at {window.generator_cpu:.0%} of its CPU: it, not the server, may have set the pace"
            )
        elif (
            arrivals > 0
            and window.behind >= max(1.0, GENERATOR_BEHIND * arrivals)
            and arrivals - achieved * window.seconds <= window.behind
        ):
            # its own schedule kept late while the server answered about all it was sent: the
            # latencies from the intended send times hold the generator's delay, not only the
            # server's. (A server that answered far fewer than were sent is the limit whatever
            # the generator's delays, which a busy machine gives it.)
            verdict.inconclusive = True
            verdict.kind = "generator"
            verdict.reasons.insert(
                0,
                f"the generator fell behind its own schedule: {window.behind:,} of {arrivals:,.0f} arrivals queued late "
                f"({window.behind / arrivals:.0%}): it, not the server, set the pace",
            )
    return verdict


@dataclass
class StepRecord:
    """A step as the search keeps it (and writes it to ``capacity.json``)."""

    index: int
    offered: float
    verdict: Verdict
    window: Window
    phase: str  # "double" or "bisect"

    def to_dict(self, unit: Unit) -> dict[str, Any]:
        h = self.window.latency(unit)
        server = self.window.server
        return {
            "step": self.index,
            "phase": self.phase,
            "offered": self.offered,
            "achieved": self.verdict.achieved,
            "seconds": self.window.seconds,
            "requests": self.window.count(None)[0],
            "failures": self.window.count(None)[1],
            "failures_by_reason": dict(sorted(self.window.reasons.items(), key=lambda kv: (-kv[1], kv[0]))),
            "dropped": self.window.dropped,
            "behind": self.window.behind,
            "latency_us": {f"p{p:g}": (h.value_at_percentile(p) if h.total_count else None) for p in PERCENTILES},
            "max_us": h.max if h.total_count else None,
            "generator_cpu": self.window.generator_cpu,
            "server_cpu": server.cpu,
            "server_rss_bytes": server.rss_bytes,
            "sessions_open": server.sessions_open,
            "slo": self.verdict.clauses,
            "verdict": self.verdict.label,
            "reasons": self.verdict.reasons,
        }


@dataclass
class Outcome:
    """How the search ended."""

    status: str  # found | at_least | below | bracket | inconclusive | aborted
    capacity: float | None  # the highest rate that passed, when the bracket is within the resolution
    last_good: float | None
    first_bad: float | None
    why: str  # one phrase: why it ended there


class Search:
    """Doubling, then bisection, bounded in time. Feed it each step's verdict in turn."""

    def __init__(self, settings: SearchSettings) -> None:
        self.settings = settings.check()
        self.steps: list[StepRecord] = []
        self.last_good: float | None = None
        self.first_bad: float | None = None
        self.outcome: Outcome | None = None
        self.elapsed_s = 0.0

    @property
    def phase(self) -> str:
        return "double" if self.first_bad is None else "bisect"

    def next_rate(self, elapsed_s: float) -> float | None:
        """The next step's offered rate, or None when the search has ended (see ``outcome``)."""
        if self.outcome is not None:
            return None
        s = self.settings
        self.elapsed_s = elapsed_s
        if self.first_bad is None:
            if self.last_good is None:
                rate = s.start
            elif self.last_good >= s.max_rate:
                self._end("at_least", self.last_good, f"it held the maximum rate, {s.max_rate:,.0f}/s")
                return None
            else:
                rate = min(self.last_good * 2, s.max_rate)
        else:
            if self.last_good is None:
                self._end("below", None, f"the first step, {s.start:,.0f}/s, failed")
                return None
            if (self.first_bad - self.last_good) / self.last_good <= s.resolution:
                self._end("found", self.last_good, f"last good and first bad within {s.resolution:.0%}")
                return None
            rate = (self.last_good + self.first_bad) / 2
        if elapsed_s + s.step_s > s.max_time_s:
            if self.last_good is None:
                self._end("below", None, "the time bound ended the search before a step passed")
                return None
            status = "bracket" if self.first_bad is not None else "at_least"
            self._end(status, self.last_good, f"the time bound ({s.max_time_s:g} s) ended the search")
            return None
        return rate

    def record(self, offered: float, window: Window, verdict: Verdict) -> None:
        """Add a step's result; a failed step whose server is gone or whose generator was the
        limit ends the search."""
        self.steps.append(StepRecord(len(self.steps) + 1, offered, verdict, window, self.phase))
        if verdict.passed:
            self.last_good = offered if self.last_good is None else max(self.last_good, offered)
            return
        if verdict.inconclusive:
            why = "ran out of CPU" if window.generator_cpu >= GENERATOR_BUSY else "fell behind its schedule"
            self._end("inconclusive", None, f"the generator {why}: add Locust workers (--processes or more machines)")
            return
        self.first_bad = offered if self.first_bad is None else min(self.first_bad, offered)
        if not window.server.alive:
            self._end("aborted", None, "the server exited during the search")
        elif self.settings.stop_on_failure:
            self._end("bracket" if self.last_good is not None else "below", self.last_good, "stopped at the first failed step")

    def _end(self, status: str, capacity: float | None, why: str) -> None:
        # only a bracket within the resolution is a capacity: "at least", a bracket the time
        # bound left wide and an aborted search give their bounds, never a number made up
        self.outcome = Outcome(status, capacity if status == "found" else None, self.last_good, self.first_bad, why)


def sentence(search: Search, slo: list[Threshold], unit: Unit) -> str:
    """What the search found and what broke first, in one sentence with numbers."""
    out = search.outcome
    if out is None:
        return "the search has not ended"
    slo_text = " and ".join(t.text for t in slo)
    unit_label = unit.label
    broke = _first_break(search)
    if out.status == "found":
        head = f"capacity {out.capacity:,.0f} {unit_label} at {slo_text}"
    elif out.status == "at_least":
        head = f"capacity at least {out.last_good:,.0f} {unit_label} at {slo_text} ({out.why})"
    elif out.status == "below":
        head = f"capacity below {search.settings.start:,.0f} {unit_label} at {slo_text} ({out.why})"
    elif out.status == "bracket":
        head = f"capacity between {out.last_good:,.0f} and {out.first_bad:,.0f} {unit_label} at {slo_text} ({out.why})"
    elif out.status == "inconclusive":
        good = f"; the server held {out.last_good:,.0f} {unit_label}" if out.last_good else ""
        head = f"inconclusive: {out.why}{good}"
    else:
        good = f" after holding {out.last_good:,.0f} {unit_label}" if out.last_good else ""
        head = f"search aborted: {out.why}{good}"
    return f"{head}; {broke}" if broke else head


def _first_break(search: Search) -> str:
    """The lowest failed step's reasons, with the server's state then."""
    failed = [s for s in search.steps if not s.verdict.passed]
    if not failed:
        return ""
    step = min(failed, key=lambda s: s.offered)
    parts = list(step.verdict.reasons)
    server = step.window.server
    state = []
    if server.cpu is not None:
        state.append(f"the server at {server.cpu:.0%} CPU")
    if server.rss_bytes is not None:
        state.append(f"{server.rss_bytes / 2**20:,.0f} MiB RSS")
    if server.sessions_open is not None:
        state.append(f"{server.sessions_open:,} sessions open")
    text = f"at {step.offered:,.0f}/s " + ", ".join(parts)
    return text + (f" with {', '.join(state)}" if state else "")
