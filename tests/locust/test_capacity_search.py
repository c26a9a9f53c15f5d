"""The capacity search's pure logic: steps, verdicts, outcomes and the sentence, on windows made
by a model server of known capacity (no load is sent here; the searches against real servers
are in tests/capacity)."""

from __future__ import annotations

import pytest

from mcpfast.locust.capacity import (
    Search,
    SearchSettings,
    ServerSample,
    Unit,
    Window,
    judge,
    parse_slo,
    sentence,
)
from mcpfast.locust.histogram import HistogramSet
from mcpfast.locust.thresholds import ThresholdError

CALLS = Unit("calls/s", frozenset({"tools/call:echo"}))


def window(
    offered: float,
    capacity: float,
    *,
    latency_us: int = 800,
    overload_latency_us: int = 250_000,
    seconds: float = 5.0,
    failures: int = 0,
    generator_cpu: float = 0.3,
    behind: int = 0,
    alive: bool = True,
) -> Window:
    """What a server that holds ``capacity``/s would show at ``offered``/s: below it every
    arrival completes at ``latency_us``; above it the queue grows, so fewer complete and late."""
    ok, failed = HistogramSet(), HistogramSet()
    done = int(min(offered, capacity) * seconds)
    slow = offered > capacity
    h = ok.get("mcp-http", "tools/call:echo")
    h.record(overload_latency_us if slow else latency_us, max(done - failures, 0))
    ok.get("mcp-http", "initialize").record(2000, 8)  # set-up rows never count as the unit
    reasons = {}
    if failures:
        failed.get("mcp-http", "tools/call:echo").record(latency_us, failures)
        reasons = {"http 503": failures}
    return Window(
        offered=offered,
        seconds=seconds,
        ok=ok,
        failed=failed,
        reasons=reasons,
        generator_cpu=generator_cpu,
        behind=behind,
        server=ServerSample(cpu=min(offered / capacity, 1.0), rss_bytes=64 << 20, sessions_open=8, alive=alive),
    )


def run(search: Search, capacity: float, slo: list[str], **kw: object) -> Search:
    clauses = parse_slo(slo)
    elapsed = 0.0
    while (rate := search.next_rate(elapsed)) is not None:
        w = window(rate, capacity, **kw)  # type: ignore[arg-type]
        search.record(rate, w, judge(w, clauses, CALLS, search.settings.min_achieved))
        elapsed += search.settings.step_s
    return search


def test_doubling_then_bisection_finds_the_capacity_within_the_resolution() -> None:
    s = run(Search(SearchSettings(start=50, resolution=0.05)), 200.0, ["tools/call:echo p99 < 50ms"])
    out = s.outcome
    assert out is not None and out.status == "found"
    assert out.capacity is not None and 200 * 0.95 <= out.capacity <= 200
    assert out.first_bad is not None and (out.first_bad - out.capacity) / out.capacity <= 0.05
    phases = [step.phase for step in s.steps]
    assert phases[:3] == ["double"] * 3 and phases[-1] == "bisect"
    assert [step.offered for step in s.steps[:4]] == [50, 100, 200, 400]


def test_the_step_above_capacity_fails_on_what_broke() -> None:
    slo = parse_slo(["tools/call:echo p99 < 50ms"])
    v = judge(window(400, 200), slo, CALLS)
    assert not v.passed and v.kind == "slo"
    assert any("p99 read 250 ms (SLO < 50 ms, 5x)" in r for r in v.reasons)
    assert any(r.startswith("achieved 200/s of 400/s offered") for r in v.reasons)
    # a loose SLO: the rate shortfall alone fails the step
    loose = judge(window(400, 200), parse_slo(["tools/call:echo p99 < 5s"]), CALLS)
    assert not loose.passed and loose.kind == "rate"


def test_failures_fail_a_step_unless_the_slo_bounds_them() -> None:
    w = window(100, 200, failures=3)
    strict = judge(w, parse_slo(["p99 < 50ms"]), CALLS)
    assert not strict.passed and strict.kind == "failures"
    assert "3 of 508 requests failed: http 503 (3)" in strict.reasons[0]
    bounded = judge(w, parse_slo(["p99 < 50ms", "fail_ratio < 0.01"]), CALLS)
    assert bounded.passed


def test_a_server_that_never_breaks_gives_at_least_the_maximum() -> None:
    s = run(Search(SearchSettings(start=100, max_rate=500)), 10_000.0, ["p99 < 50ms"])
    out = s.outcome
    assert out is not None and out.status == "at_least" and out.capacity is None
    assert out.last_good == 500
    assert [step.offered for step in s.steps] == [100, 200, 400, 500]
    assert "at least 500 calls/s" in sentence(s, parse_slo(["p99 < 50ms"]), CALLS)


def test_a_server_that_fails_the_first_step_is_below_it() -> None:
    s = run(Search(SearchSettings(start=100)), 20.0, ["p99 < 50ms"])
    out = s.outcome
    assert out is not None and out.status == "below" and out.capacity is None
    text = sentence(s, parse_slo(["p99 < 50ms"]), CALLS)
    assert text.startswith("capacity below 100 calls/s at p99 < 50ms")
    assert "at 100/s" in text and "the server at 100% CPU" in text


def test_a_starved_generator_makes_the_search_inconclusive() -> None:
    s = run(Search(SearchSettings(start=50)), 200.0, ["p99 < 50ms"], generator_cpu=0.97)
    out = s.outcome
    assert out is not None and out.status == "inconclusive" and out.capacity is None
    assert out.last_good == 200  # what passed is still said, as what the server held
    failed = s.steps[-1].verdict
    assert failed.inconclusive and failed.kind == "generator" and "97% of its CPU" in failed.reasons[0]
    assert "add Locust workers" in sentence(s, parse_slo(["p99 < 50ms"]), CALLS)


def test_a_generator_behind_its_own_schedule_makes_a_failed_step_inconclusive() -> None:
    """Its CPU below the line, but 1% of a window's arrivals queued late by its own pacer while
    the server answered them all: the latencies hold its delay, so the failure says nothing of
    the server; fewer late is a fail, and so is a server that answered far fewer than were sent."""
    slo = parse_slo(["p99 < 50ms"])
    # 400/s for 5 s: 2,000 arrivals, all answered, in 60 ms from their intended times
    late = judge(window(400, 500, latency_us=60_000, behind=20), slo, CALLS)
    assert late.inconclusive and late.kind == "generator"
    assert late.reasons[0].startswith("the generator fell behind its own schedule: 20 of 2,000 arrivals queued late (1%)")
    few = judge(window(400, 500, latency_us=60_000, behind=19), slo, CALLS)
    assert not few.passed and not few.inconclusive
    # a server that holds 200/s answered 1,000 of 2,000: its limit, whatever the 500 late ones did
    overloaded = judge(window(400, 200, behind=500), slo, CALLS)
    assert not overloaded.passed and not overloaded.inconclusive and overloaded.kind != "generator"
    search = run(Search(SearchSettings(start=50)), 200.0, ["p99 < 50ms"], behind=10_000)
    assert search.outcome is not None and search.outcome.status == "inconclusive"
    assert "the generator fell behind its schedule: add Locust workers" in sentence(search, slo, CALLS)


def test_a_busy_generator_on_a_passing_step_does_not_matter() -> None:
    v = judge(window(100, 200, generator_cpu=0.99), parse_slo(["p99 < 50ms"]), CALLS)
    assert v.passed and not v.inconclusive


def test_a_server_that_exits_aborts_with_what_was_known() -> None:
    search = Search(SearchSettings(start=50))
    slo = parse_slo(["p99 < 50ms"])
    for rate, alive in ((50.0, True), (100.0, False)):
        assert search.next_rate(0.0) == rate
        w = window(rate, 200 if alive else 1, alive=alive)
        search.record(rate, w, judge(w, slo, CALLS))
    out = search.outcome
    assert out is not None and out.status == "aborted" and out.last_good == 50 and out.capacity is None
    assert search.steps[-1].verdict.reasons[0] == "the server exited"


def test_the_time_bound_ends_with_the_bracket() -> None:
    settings = SearchSettings(start=50, warmup_s=2, steady_s=5, max_time_s=6 * 7.0, resolution=0.01)
    s = run(Search(settings), 200.0, ["p99 < 50ms"])
    out = s.outcome
    assert out is not None and out.status == "bracket" and out.capacity is None
    assert len(s.steps) == 6
    assert out.last_good is not None and out.first_bad is not None and out.last_good <= 200 < out.first_bad


def test_stop_on_failure_ends_at_the_first_failed_step() -> None:
    s = run(Search(SearchSettings(start=50, stop_on_failure=True)), 300.0, ["p99 < 50ms"])
    out = s.outcome
    assert out is not None and out.status == "bracket" and (out.last_good, out.first_bad) == (200, 400)
    assert [step.offered for step in s.steps] == [50, 100, 200, 400]


@pytest.mark.parametrize(
    ("texts", "names", "message"),
    [
        ([], None, "no SLO given"),
        (["p99 < "], None, "expected '[NAME ]METRIC OP VALUE[UNIT]'"),
        (["tools/call:other p99 < 5ms"], {"tools/call:echo"}, "no step sends a request named 'tools/call:other'"),
        (["rps > 100"], None, "rps is what the search finds"),
    ],
)
def test_an_slo_that_cannot_be_judged_is_refused(texts: list[str], names: set[str] | None, message: str) -> None:
    with pytest.raises(ThresholdError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_slo(texts, names)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("start", 0.0, "start rate must be above 0"),
        ("max_rate", 10.0, "maximum rate 10/s is below the start rate"),
        ("resolution", 1.5, "resolution must be in"),
        ("steady_s", 0.5, "steady window must be at least 1 s"),
        ("max_time_s", 3.0, "shorter than one step"),
        ("warmup_s", float("nan"), "warmup_s must be a finite number"),
    ],
)
def test_settings_out_of_range_are_refused(field: str, value: float, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SearchSettings(**{field: value}).check()  # type: ignore[arg-type]


def halves(first_us: int, second_us: int, n: int = 200) -> tuple[HistogramSet, HistogramSet]:
    a, b = HistogramSet(), HistogramSet()
    a.get("mcp-http", "tools/call:echo").record(first_us, n)
    b.get("mcp-http", "tools/call:echo").record(second_us, n)
    b.get("mcp-http", "initialize").record(900_000, n)  # a set-up row's latency is no trend of the unit
    return a, b


@pytest.mark.parametrize(
    ("first", "second", "text"),
    [(6_000, 80_000, "6 ms to 80 ms"), (100_000, 162_000, "100 ms to 162 ms"), (95_000, 137_000, "95 ms to 137 ms")],
)
def test_a_median_that_grows_through_the_window_is_a_growing_queue(first: int, second: int, text: str) -> None:
    w = window(195, 190, overload_latency_us=first)  # 97.4% of the offered rate completes: enough alone
    w.halves = halves(first, second)
    v = judge(w, parse_slo(["p99 < 1s"]), CALLS)
    assert not v.passed and v.kind == "rate" and len(v.reasons) == 1
    assert f"the median latency grew from {text} through the window" in v.reasons[0]


def test_a_stall_the_server_catches_up_on_is_no_growing_queue() -> None:
    w = window(190, 200)  # every arrival completed
    w.halves = halves(5_400, 14_500)
    assert judge(w, parse_slo(["p99 < 1s"]), CALLS).passed


@pytest.mark.parametrize(("first", "second"), [(6_000, 7_500), (60, 1_900), (6_000, 7_900), (40_000, 49_000)])
def test_a_steady_median_is_no_trend(first: int, second: int) -> None:
    w = window(195, 190)
    w.halves = halves(first, second)
    assert judge(w, parse_slo(["p99 < 1s"]), CALLS).passed


def test_fail_percent_is_the_ratio_in_percent() -> None:
    (t,) = parse_slo(["fail% < 0.1"])
    assert t.metric == "fail_ratio" and t.value == pytest.approx(0.001)
    w = window(100, 200, failures=1)  # 1 of 508: 0.197 %
    v = judge(w, [t], CALLS)
    assert not v.passed and v.reasons == ["fail% read 0.197% (SLO < 0.1%)"]
