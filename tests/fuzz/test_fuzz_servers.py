"""A bounded fuzz pass in the suite (about 30 s): ``make fuzz`` runs the same fuzzer longer.

Mutated HTTP requests against a real ``mcpfast serve --transport http`` (native runner) and
mutated JSON-RPC lines against a real ``mcpfast serve --transport stdio``; the properties are
in ``fuzzer.py``: one answer per request, no hang, no 5xx, alive afterwards, bounded RSS.
"""

from __future__ import annotations

import os

import pytest
from fuzzer import Report, run_http, run_stdio

pytestmark = [pytest.mark.timeout(120)]

SECONDS = float(os.environ.get("FUZZ_TEST_SECONDS", "15"))
RSS_GROWTH_LIMIT_KB = 64 * 1024


def check(report: Report) -> None:
    summary = report.as_dict()
    assert report.cases > 100, summary  # the run did fuzz something
    assert report.failures == 0, summary
    assert report.rss_end_kb - report.rss_start_kb < RSS_GROWTH_LIMIT_KB, summary


def test_http_fuzz() -> None:
    report = run_http(SECONDS, seed=12)
    check(report)
    assert report.statuses[400] > 0 and report.statuses[200] > 0  # both refusals and real answers


def test_stdio_fuzz() -> None:
    check(run_stdio(SECONDS * 0.7, seed=13))
