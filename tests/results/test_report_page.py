"""``report.html``: the page of a plain locust run (written at test stop), of a bench run and of
bad input (no request, markup in a name, a folder of an older mcpfast). The figures are read
back from the page's JSON block and its SVG text, not from pixels."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcpfast.bench.procs import child_env
from mcpfast.locust.histogram import Histogram
from mcpfast.locust.hlog import IntervalLog, tag_of
from mcpfast.locust.report_page import write_run_page
from mcpfast.results.page import bench_page
from results import hdrh_log

ROOT = Path(__file__).resolve().parents[2]
START = 1_800_000_000.0
KIND = "mcp-http"


def _hist(values: list[int]) -> Histogram:
    h = Histogram()
    for v in values:
        h.record(v)
    return h


def _run(names: dict[str, list[list[int]]], failed: dict[str, list[int]] | None = None, **extra: Any) -> tuple[dict[str, Any], IntervalLog]:
    """A ``_histograms.json`` and its interval log: ``names[name][second]`` are that second's µs."""
    log = IntervalLog()
    log.reset(START)
    entries = []
    for name, seconds in names.items():
        total = Histogram()
        for i, values in enumerate(seconds):
            h = _hist(values)
            total.merge(h)
            log.add(tag_of(KIND, name), START + i, START + i + 1, h)
        entries.append({"type": KIND, "name": name, **total.to_dict()})
    bad = [{"type": KIND, "name": n, **_hist(v).to_dict()} for n, v in (failed or {}).items()]
    duration = float(max((len(s) for s in names.values()), default=1))
    data = {"format": "mcpfast-histograms", "start_time": START, "duration_s": duration, "histograms": entries, "failed_histograms": bad}
    return {**data, **extra}, log


def _data_block(page: str) -> dict[str, Any]:
    found = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page, re.S)
    assert found is not None
    return json.loads(found.group(1))


def _ticks(page: str) -> list[str]:
    return re.findall(r'<text x="[^"]+" y="[^"]+" text-anchor="end">([^<]*)</text>', page)  # the y axes' labels


def test_the_verdict_comes_first_and_small_latencies_are_microseconds(tmp_path: Path) -> None:
    calls = [[40 + (i * 7 + s) % 50 for i in range(400)] for s in range(5)]
    data, log = _run({"tools/call:echo": calls, "initialize": [[1500, 1600]]})
    page = write_run_page(tmp_path / "x_report.html", data, log).read_text(encoding="utf-8")
    assert page.index('id="verdict"') < page.index("<table") < page.index("<svg")
    assert "OK: 2,002 requests in 5.0 s (400/s), none failed" in page
    assert '<td class="">89 µs</td>' in page and "1.6 ms" in page  # µs below 1 ms, ms above, in the table
    ticks = _ticks(page)
    assert any(t.endswith(" µs") for t in ticks) and any(t.endswith(" ms") for t in ticks), ticks
    assert not [t for t in ticks if re.search(r"e[-+]?\d|×|\^", t)], ticks  # never scientific notation
    assert "<script src" not in page and "http://" not in page and "https://" not in page  # nothing from the network


def test_the_timeline_is_the_interval_histograms(tmp_path: Path) -> None:
    calls = [[50] * 300 + [50 + 100 * s] * 10 for s in range(6)]  # each second's p99 is its own
    data, log = _run({"tools/call:echo": calls})
    log.write(str(tmp_path / "x_histograms.hlog"))
    charts = _data_block(write_run_page(tmp_path / "x_report.html", data, log).read_text(encoding="utf-8"))["run"]["charts"]
    latency = next(c for c in charts if c["title"] == "p50 and p99 per interval")
    line = next(s for s in latency["series"] if s["label"] == "tools/call:echo p99")
    want = hdrh_log.intervals(tmp_path / "x_histograms.hlog")[tag_of(KIND, "tools/call:echo")]
    assert line["points"] == [[pytest.approx(s + n - START), p99] for s, n, _c, p99 in want]
    assert [p[1] for p in line["points"]] == [50, 150, 250, 350, 450, 550]
    rate = next(c for c in charts if c["title"] == "Requests per second per interval")
    assert [p[1] for p in rate["series"][0]["points"]] == [310.0] * 6


def test_failures_and_thresholds_lead_the_verdict_with_their_reasons(tmp_path: Path) -> None:
    gates = [{"threshold": "tools/call:echo p99<100us", "passed": False, "measured": 250, "measured_unit": "us", "measured_text": "0.25ms"}]
    data, log = _run({"tools/call:echo": [[250] * 100]}, failed={"tools/call:echo": [900] * 3}, thresholds=gates)
    reasons = [(KIND, "tools/call:echo", "http 400 unknown tool: echo", 3)]
    page = write_run_page(tmp_path / "x_report.html", data, log, reasons).read_text(encoding="utf-8")
    verdict = page[page.index('id="verdict"') : page.index("</section>")]
    assert "FAILED: 3 of 103 requests failed" in verdict
    assert "threshold failed: tools/call:echo p99&lt;100us (measured 250 µs)" in verdict
    assert "tools/call:echo: http 400 unknown tool: echo (3)" in verdict
    assert page.index("Failures by reason") > page.index("<svg")  # and again, with latencies, below the charts


def test_markup_in_a_name_is_text_everywhere(tmp_path: Path) -> None:
    name = '</script><script>alert(1)</script><img src=x onerror=alert(2)>&"'
    data, log = _run({name: [[100] * 50, [120] * 50]})
    page = write_run_page(tmp_path / "x_report.html", data, log, [(KIND, name, "<b>bold</b>", 1)]).read_text(encoding="utf-8")
    assert page.count("<script") == 1 and "<img" not in page and "<b>" not in page  # the JSON block only
    assert "&lt;/script&gt;&lt;script&gt;alert(1)" in page
    block = _data_block(page)  # the name survives in the data, unbroken
    assert any(s["label"] == name for c in block["run"]["charts"] for s in c.get("series", []))


def test_a_run_with_no_request_says_so_and_draws_nothing(tmp_path: Path) -> None:
    data, log = _run({})
    page = write_run_page(tmp_path / "x_report.html", data, log).read_text(encoding="utf-8")
    assert "No request completed: nothing was measured" in page and "No request completed in this run" in page
    assert "<svg" not in page and "<table" not in page


def test_a_bench_folder_of_an_older_mcpfast_gets_a_page_naming_what_is_missing(tmp_path: Path) -> None:
    data, _log = _run({"tools/call:echo": [[60] * 200, [70] * 200]})
    del data["start_time"]
    (tmp_path / "tools_call-http_histograms.json").write_text(json.dumps(data))  # and no .hlog beside it
    summary = {
        "format": "mcpfast-bench",
        "run": "old",
        "families": [{"family": "tools_call", "transport": "http", "status": "ok"}, {"family": "handshake", "transport": "http"}],
        "rows": [{"family": "tools_call", "transport": "http", "name": "tools/call:echo", "count": 400, "p50_us": 60}],
    }
    page = bench_page(tmp_path, summary).read_text(encoding="utf-8")
    assert "this summary.json has no verdict (an older mcpfast)" in page
    assert "No interval log (.hlog) beside these histograms" in page
    assert "No handshake-http_histograms.json: no figures for this run" in page
    families = _data_block(page)["families"]
    timeline = [c for c in families["tools_call/http"]["charts"] if c["title"] == "p50 and p99 per interval"]
    assert timeline[0]["empty"] and not timeline[0]["series"]  # said, not drawn as if it were data
    assert page.count("<svg") == 1  # the percentile curve only


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_a_plain_locust_run_with_csv_writes_its_page(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "locust", "-f", str(ROOT / "loadtests" / "tools_call.py"), "--headless", "-u", "1", "-r", "1"]
    argv += ["-t", "3s", "--mcp-command", f"{sys.executable} -m mcpfast serve", "--csv", str(tmp_path / "run"), "--only-summary"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=80, cwd=tmp_path, env=child_env())
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    page = (tmp_path / "run_report.html").read_text(encoding="utf-8")
    assert re.search(r'<p class="headline">OK: [\d,]+ requests in', page), page[:3000]
    block = _data_block(page)
    names = {s["label"] for c in block["run"]["charts"] for s in c.get("series", [])}
    assert {"tools/call:echo p99", "Aggregated p99"} <= names
