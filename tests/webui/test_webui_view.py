"""What the MCP tab shows, computed from histograms (:mod:`mcpfast.locust.webui_view`, pure: no
Locust in this process), and the page's own files (self-contained, data drawn as text)."""

from __future__ import annotations

import math
import re
from importlib import resources

import pytest

from mcpfast.locust import webui_view as view
from mcpfast.locust.capacity import GENERATOR_BUSY
from mcpfast.locust.histogram import Histogram, HistogramSet
from mcpfast.locust.hlog import IntervalLog, tag_of

PERCENTILES = (50.0, 90.0, 99.0, 99.9, 99.99)
SCIENTIFIC = re.compile(r"\d[eE][-+]?\d")


def hist(*values: int) -> Histogram:
    h = Histogram()
    for v in values:
        h.record(v)
    return h


@pytest.mark.parametrize(
    ("us", "text"),
    [
        (0, "0 µs"),
        (1, "1 µs"),
        (63, "63 µs"),
        (278, "278 µs"),
        (999, "999 µs"),
        (999.6, "1 ms"),  # rounds to 1,000 µs: shown in ms, never "1000 µs"
        (1000, "1 ms"),
        (4100, "4.1 ms"),
        (4123, "4.12 ms"),
        (41_234, "41.2 ms"),
        (412_345, "412 ms"),
        (999_499, "999 ms"),
        (999_700, "1 s"),  # 999.7 ms to three digits is 1,000 ms: shown in s
        (1_500_000, "1.5 s"),
        (60_000_000, "60 s"),
    ],
)
def test_latency_text_is_us_below_1_ms_and_ms_below_1_s(us: float, text: str) -> None:
    assert view.latency_text(us) == text


def test_latency_text_never_uses_scientific_notation() -> None:
    for k in range(781):  # 1 µs to 60 s, 100 values a decade, and each value's neighbours
        for us in (10 ** (k / 100) - 0.5, 10 ** (k / 100), 10 ** (k / 100) + 0.5):
            text = view.latency_text(us)
            assert not SCIENTIFIC.search(text), (us, text)
            number, unit = text.split(" ")
            assert {"µs": us < 999.5, "ms": 999.5 <= us < 999_500, "s": us >= 999_500}[unit], (us, text)
            assert abs(float(number) * {"µs": 1, "ms": 1e3, "s": 1e6}[unit] - us) <= max(0.5, us * 0.005), (us, text)


def test_rows_are_the_histograms_percentiles_of_the_successes() -> None:
    ok, failed = HistogramSet(), HistogramSet()
    calls = ok.get("mcp-http", "tools/call:echo")
    for v in range(1, 10_001):
        calls.record(v)
    ok.get("mcp-http", "initialize").record(2500)
    failed.get("mcp-http", "tools/call:echo").record(90_000, 3)
    failed.get("mcp-http", "DELETE").record(50)  # failures only: a row without percentiles
    rows, total = view.name_rows(ok, failed, PERCENTILES)
    by_name = {r.name: r for r in rows}
    assert [r.name for r in rows] == ["DELETE", "initialize", "tools/call:echo"]
    call = by_name["tools/call:echo"]
    assert (call.requests, call.failures, call.max) == (10_003, 3, 10_000)
    assert [call.values[p] for p in PERCENTILES] == calls.percentiles(PERCENTILES)
    assert total is not None and (total.requests, total.failures) == (10_005, 4)
    cells = {c["name"]: c for c in view.tab_rows(rows, total, PERCENTILES)}
    assert cells["tools/call:echo"]["p50"] == view.latency_text(calls.value_at_percentile(50)) == "5 ms"
    assert cells["tools/call:echo"]["p999"] == view.latency_text(calls.value_at_percentile(99.9))
    assert cells["tools/call:echo"]["requests"] == "10,003"
    assert cells["DELETE"]["p50"] == "–" and cells["DELETE"]["failures"] == "1"
    assert list(cells) == ["DELETE", "initialize", "tools/call:echo", "Aggregated"]
    assert {c["key"] for c in view.tab_columns(PERCENTILES)} == set(cells["Aggregated"])


def test_no_request_yet_is_said_not_drawn() -> None:
    rows, total = view.name_rows(HistogramSet(), HistogramSet(), PERCENTILES)
    assert (rows, total) == ([], None)
    assert view.tab_rows(rows, total, PERCENTILES) == [{"type": "", "name": view.NO_REQUESTS, "requests": "0", "failures": "0"}]
    chart = view.percentile_chart([("tools/call:echo", Histogram())])
    assert chart["empty"] and chart["series"] == [] and "x" not in chart
    timeline = view.Timeline()
    timeline.update(IntervalLog())
    assert timeline.chart([("mcp-http", "tools/call:echo")], 0.0)["empty"]
    assert view.capacity_view({"steps": [], "slo": ["p99 < 5ms"], "unit": "calls/s"})["chart"]["empty"]


def test_the_percentile_curve_runs_from_the_median_to_the_max() -> None:
    h = hist(*range(1, 1001))
    chart = view.percentile_chart([("a", h), ("empty", Histogram())])
    assert [s["label"] for s in chart["series"]] == ["a"]
    points = chart["series"][0]["points"]
    assert points[0] == [0.0, 1.0] and points[-1] == [3.0, 1000.0]  # x in nines: 3 is p99.9, one sample in 1,000
    assert [x for x, _ in points] == sorted(x for x, _ in points)
    assert [y for _, y in points] == sorted(y for _, y in points)
    p90 = next(y for x, y in points if math.isclose(x, 1.0))
    assert p90 == h.value_at_percentile(90)
    assert [t[1] for t in chart["x"]["ticks"]] == ["0%", "50%", "90%", "99%", "99.9%"]
    y = chart["y"]
    assert y["lo"] <= 1 and y["hi"] >= 1000 and y["log"]


@pytest.mark.parametrize(("lo", "hi"), [(1, 1), (63, 4100), (50, 60_000_000), (999, 1001), (3, 2_000_000)])
def test_a_latency_axis_holds_its_values_and_labels_its_ticks_in_units(lo: int, hi: int) -> None:
    axis = view.latency_axis(lo, hi)
    assert axis["lo"] <= lo and axis["hi"] >= hi and axis["lo"] < axis["hi"]
    assert len(axis["ticks"]) >= 2
    for value, label in axis["ticks"]:
        assert axis["lo"] <= value <= axis["hi"] and label == view.latency_text(value)
        assert not SCIENTIFIC.search(label)


def test_a_linear_axis_has_distinct_labels() -> None:
    for hi in (0.3, 2.0, 7.5, 73.2, 1234.0, 250_000.0):
        axis = view.linear_axis(0.0, hi, "t", " s")
        labels = [label for _, label in axis["ticks"]]
        assert len(set(labels)) == len(labels) >= 2 and not any(SCIENTIFIC.search(label) for label in labels), labels
    assert [label for _, label in view.linear_axis(0.0, 1234.0, "rate")["ticks"]] == ["0", "500", "1,000"]


def test_the_timeline_has_p50_and_p99_per_interval_of_each_name() -> None:
    log = IntervalLog()
    name = "tools/call:echo (first)"  # a name whose log tag replaces its space
    log.add(tag_of("mcp-http", name), 100.0, 101.0, hist(*range(1, 101)))
    log.add(tag_of("mcp-http", name), 101.0, 102.0, hist(*range(1001, 1101)))
    log.add(tag_of("mcp-http", name, failed=True), 101.0, 102.0, hist(5))
    timeline = view.Timeline()
    timeline.update(log)
    chart = timeline.chart([("mcp-http", name)], 100.0)
    p50, p99 = chart["series"]
    assert (p50["label"], p99["label"], p99.get("dash")) == (f"{name} p50", f"{name} p99", True)
    assert p50["points"] == [[0.0, 50.0], [1.0, 1050.0]] and p99["points"] == [[0.0, 99.0], [1.0, 1099.0]]
    log.add(tag_of("mcp-http", name), 102.0, 103.0, hist(7))
    timeline.update(log)  # only the new interval is read
    assert timeline.chart([("mcp-http", name)], 100.0)["series"][0]["points"][-1] == [2.0, 7.0]
    log.reset(200.0)  # a new test: a new list, the old points are gone
    timeline.update(log)
    assert timeline.chart([("mcp-http", name)], 200.0)["empty"]


def test_handshake_phases_come_in_the_order_a_session_opens() -> None:
    ok = HistogramSet()
    for name in ("DELETE", "tools/call:echo", "tools/call:echo (first)", "initialize", "connect", "notifications/initialized", "sse:gap"):
        ok.get("mcp-http", name).record(100)
    ok.get("mcp-http", "initialize").record(400)
    rows, _ = view.name_rows(ok, HistogramSet(), PERCENTILES)
    phases = view.phases(rows)
    assert [p["name"] for p in phases] == ["connect", "initialize", "notifications/initialized", "tools/call:echo (first)", "DELETE"]
    init = phases[1]
    assert (init["p50"], init["p99"], init["p99_share"]) == ("100 µs", "400 µs", 1.0)


def test_failures_have_their_own_latencies_and_reasons_most_frequent_first() -> None:
    failed = HistogramSet()
    failed.get("mcp-http", "tools/call:x").record(30_000, 9)
    failed.get("mcp-http", "tools/call:x").record(500)
    reasons = [("mcp-http", "tools/call:x", "timeout", 2), ("mcp-http", "tools/call:x", "jsonrpc -32602 unknown tool", 8)]
    (entry,) = view.failures(failed, reasons)
    assert (entry["count"], entry["p50"], entry["max"]) == (10, "30 ms", "30 ms")
    assert [r["reason"] for r in entry["reasons"]] == ["jsonrpc -32602 unknown tool", "timeout"]


@pytest.mark.parametrize(
    ("shares", "red"), [({"a": 0.2, "b": GENERATOR_BUSY}, True), ({"a": GENERATOR_BUSY - 0.01}, False), ({"a": None}, False)]
)
def test_the_gauge_is_red_by_the_capacity_searchs_rule(shares: dict[str, float | None], red: bool) -> None:
    gauge = view.generator_view(shares, GENERATOR_BUSY)
    assert gauge["red"] is red and gauge["busy_text"] == "90%"
    assert gauge["text"] == ("measuring" if gauge["share"] is None else view.share_text(gauge["share"]))


def test_a_capacity_search_is_a_curve_with_its_slo() -> None:
    step = {"step": 1, "offered": 500.0, "achieved": 498.0, "latency_us": {"p50": 80, "p90": 120, "p99": 900, "p99.9": 2000}}
    between = {"step": 3, "offered": 750.0, "achieved": 650.0, "latency_us": {"p50": 90, "p90": 150, "p99": 1500}, "verdict": "pass"}
    bad = {"step": 2, "offered": 1000.0, "achieved": 700.0, "latency_us": {"p50": 3000, "p90": 9000, "p99": 20_000, "p99.9": 30_000}}
    progress = {
        "status": "running",
        "sentence": "so far",
        "unit": "calls/s",
        "slo": ["tools/call:echo p99 < 5ms", "fail% < 1"],
        "steps": [{**bad, "verdict": "fail", "generator_cpu": 0.3}, {**step, "verdict": "pass", "generator_cpu": 0.2}, between],
    }
    cap = view.capacity_view(progress)
    assert cap is not None and view.capacity_view(None) is None
    assert [s["step"] for s in cap["steps"]] == [1, 2, 3] and cap["steps"][1]["p99"] == "20 ms"
    chart = cap["chart"]
    p99 = next(s for s in chart["series"] if s["label"] == "p99")
    # along the achieved rate, not in step order (the bisection's third step lies between)
    assert p99["points"] == [[498.0, 900.0], [650.0, 1500.0], [700.0, 20_000.0]] and p99["symbols"] == ["circle", "circle", "cross"]
    (slo,) = chart["hlines"]  # the latency bound; fail% is no line on a latency axis
    assert slo["y"] == 5000.0 and "5 ms" in slo["label"]
    assert chart["y"]["lo"] <= 80 and chart["y"]["hi"] >= 20_000 and chart["x"]["hi"] > 700


def test_the_page_is_self_contained_and_draws_data_as_text() -> None:
    folder = resources.files("mcpfast.locust").joinpath("webui_static")
    for name in ("mcp.html", "embed.js"):
        text = folder.joinpath(name).read_text(encoding="utf-8")
        assert "innerHTML" not in text and "insertAdjacentHTML" not in text and "document.write" not in text
        # no network but its own routes: the only absolute URL is the SVG namespace, which is never fetched
        assert set(re.findall(r"https?://[^\s\"']+", text)) <= {"http://www.w3.org/2000/svg"}, name
        assert not re.search(r"""(src|href)\s*=\s*["'](https?:)?//""", text), name
