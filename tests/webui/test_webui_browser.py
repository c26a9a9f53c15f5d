"""The MCP tab of Locust's web UI, read in a real browser (Debian's headless Chromium, driven by
selenium) from a real Locust web UI run of the native engine against ``mcpfast serve``.

One Locust process and one browser session, three runs started from the web UI's own ``/swarm``:

1. before any request, the page says so and draws no plot;
2. a tools/call run: the tab's count changes between two reads while it runs, and once the run
   is over the tab's p50 and p99 of ``tools/call:echo`` are the run's ``_histograms.json`` figures
   to the display's three significant digits;
3. a run whose tool name is markup (``--mcp-tool`` set through the form): every call fails, and the
   tab and the page show the name and the failures' reason as text, run nothing of it, and list
   the failures by reason with their latencies.
"""

from __future__ import annotations

import json
import re
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from _support import REPO_ROOT, child_env, free_port, start_process, start_reference_server, stop, stop_process

from benchmarks.screenshots import chromium, wait_for
from mcpfast.locust.options import native_available

pytestmark = pytest.mark.skipif(not native_available(), reason="mcpfast._core has no NativeEngine (not built)")

CALL = "tools/call:echo"
BAD_TOOL = '<img src=x onerror="window.__xss=1">&\''
UNITS = {"µs": 1.0, "ms": 1000.0, "s": 1_000_000.0}


def latency(text: str) -> tuple[float, float]:
    """A latency cell in µs, and half a unit of its last digit (three significant digits above
    1 ms, whole µs below)."""
    m = re.fullmatch(r"([0-9.]+) (µs|ms|s)", text)
    assert m, f"not a latency: {text!r}"
    value, scale = float(m[1]), UNITS[m[2]]
    digits = 0.5 if m[2] == "µs" else 0.5 * 10 ** (len(str(int(value))) - 3)
    return value * scale, digits * scale


def post(web: int, path: str, form: dict[str, str] | None = None) -> dict[str, Any]:
    body = urllib.parse.urlencode(form or {}).encode()
    with urllib.request.urlopen(f"http://127.0.0.1:{web}{path}", data=body, timeout=10) as r:  # 127.0.0.1 only
        return json.loads(r.read())


def get(web: int, path: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{web}{path}", timeout=10) as r:  # 127.0.0.1 only
        return json.loads(r.read())


def running(web: int) -> None:
    """Wait until Locust's ``/stats/requests`` says the run is on: the page loaded next must not get
    the copy of it Locust keeps for two seconds from before the start, or it would show the start
    form and never ask again."""
    wait_for(lambda: get(web, "/stats/requests")["state"] == "running", 10, "the run to start")


def tab(browser: Any) -> dict[str, dict[str, str]]:
    """The MCP tab's table as Locust drew it: ``{name: {column title: cell text}}``."""
    return browser.execute_script(
        """
        const t = document.querySelector('#root table');
        if (!t) return {};
        const head = [...t.querySelectorAll('thead th')].map(th => th.textContent);
        const out = {};
        for (const tr of t.querySelectorAll('tbody tr')) {
            const cells = [...tr.querySelectorAll('td')].map(td => td.textContent);
            const row = Object.fromEntries(head.map((h, i) => [h, cells[i]]));
            out[row['Name']] = row;
        }
        return out;
        """
    )


def in_frame(browser: Any, css: str, what: str) -> Any:
    """Enter the MCP page's frame below the tab's table (the tab's script adds it within half a
    second of the table) and wait for ``css`` in it; returns the elements found."""

    def found() -> Any:
        browser.switch_to.default_content()
        browser.switch_to.frame(browser.find_element("id", "mcpfast-mcp-frame"))
        return browser.find_elements("css selector", css)

    return wait_for(found, 15, what)


def count(row: dict[str, str]) -> int:
    return int(row["# Requests"].replace(",", ""))


@pytest.fixture(scope="module")
def browser() -> Any:
    driver = chromium()
    yield driver
    driver.quit()


def test_the_mcp_tab_in_a_browser(tmp_path: Path, browser: Any) -> None:
    server, url = start_reference_server()
    web = free_port()
    cmd = [sys.executable, "-m", "locust", "-f", str(REPO_ROOT / "loadtests" / "tools_call.py"), "--web-host", "127.0.0.1"]
    cmd += ["--web-port", str(web), "--host", url, "--mcp-engine", "native", "--csv", str(tmp_path / "run")]
    log = tmp_path / "locust.log"
    with log.open("wb") as out:
        locust = start_process(cmd, web, "locust with the web UI", env=child_env(), cwd=tmp_path, stderr=out)
    try:
        # 1. no request yet: the tab's one row says so, the page too, and it draws no plot
        assert [r["name"] for r in get(web, "/stats/requests")["extended_stats"][0]["data"]] == ["no requests yet"]
        browser.get(f"http://127.0.0.1:{web}/mcp")
        wait_for(lambda: browser.find_element("id", "empty").is_displayed(), 15, "the page's no-request sentence")
        assert browser.find_element("id", "empty").text.startswith("No requests yet")
        for chart in ("percentiles", "timeline"):
            assert browser.find_elements("css selector", f"#{chart} svg") == []
            assert browser.find_element("css selector", f"#{chart} p.empty").text

        # 2. a native tools/call run of 8 users: the tab changes while it runs ...
        assert post(web, "/swarm", {"user_count": "8", "spawn_rate": "8", "run_time": "6s"})["success"]
        running(web)
        browser.get(f"http://127.0.0.1:{web}/?tab=mcp")
        first = count(wait_for(lambda: tab(browser).get(CALL), 20, "the tab's tools/call row"))
        second = count(wait_for(lambda: (row := tab(browser).get(CALL)) and count(row) != first and row, 10, "a new count"))
        assert get(web, "/stats/requests")["state"] == "running"  # both reads were during the run
        assert 0 < first < second
        # ... with the page below its table: the gauge and the curves of the run
        in_frame(browser, "#percentiles svg g.series", "the percentile curves")
        assert re.fullmatch(r"\d+%|measuring", browser.find_element("id", "gauge-text").text)
        # read in one script: the page redraws its plots while it runs, so elements found in one
        # WebDriver call may be gone by the next
        labels = browser.execute_script(
            "return [...document.querySelectorAll('#percentiles svg g.series')].map(g => g.getAttribute('data-label'));"
        )
        assert CALL in labels, labels
        browser.switch_to.default_content()
        time.sleep(1.5)  # the frame follows its page's height every half second: it must not grow past it
        frame, page = browser.execute_script(
            "const f = document.getElementById('mcpfast-mcp-frame');"
            "return [f.getBoundingClientRect().height, f.contentDocument.body.offsetHeight];"
        )
        assert page <= frame <= page + 60, (frame, page)

        # ... and once the run is over it shows the run's _histograms.json figures
        written = tmp_path / "run_histograms.json"
        wait_for(written.exists, 30, "the run's _histograms.json")
        report = {h["name"]: h["summary"] for h in json.loads(written.read_text())["histograms"]}[CALL]
        browser.get(f"http://127.0.0.1:{web}/?tab=mcp")
        final = wait_for(lambda: tab(browser).get(CALL), 20, "the final tools/call row")
        assert count(final) == report["count"]  # no failures in this run
        for column in ("p50", "p99"):
            shown, rounding = latency(final[column])
            print(f"{CALL} {column}: the tab shows {final[column]}, _histograms.json has {report[column]} µs")
            assert abs(shown - report[column]) <= rounding, (column, final[column], report[column])

        # 3. a tool name that is markup: text everywhere, nothing of it run
        form = {"user_count": "2", "spawn_rate": "2", "run_time": "3s", "mcp_tool": BAD_TOOL}
        assert post(web, "/swarm", form)["success"]
        running(web)
        name = f"tools/call:{BAD_TOOL}"
        browser.get(f"http://127.0.0.1:{web}/?tab=mcp")
        row = wait_for(lambda: (r := tab(browser).get(name)) and int(r["# Fails"].replace(",", "")) > 0 and r, 20, "the failing row")
        assert row["Type"] == "mcp-http" and row["p50"] == "–"  # no successful call: no percentile
        in_frame(browser, "#failure-table tbody tr", "the failures by reason")
        failed = browser.execute_script(  # one script: the table is redrawn while the run goes on
            "return [...document.querySelectorAll('#failure-table tbody tr')]"
            ".map(tr => [...tr.querySelectorAll('td')].map(td => td.innerText));"
        )
        assert failed[0][1] == name and failed[0][6], failed  # the name and a reason, as text
        assert re.fullmatch(r"[0-9.]+ (µs|ms|s)", failed[0][3])  # the failures' own p50
        assert browser.find_elements("css selector", "img") == [] and browser.execute_script("return window.__xss") is None
        browser.switch_to.default_content()
        assert browser.find_elements("css selector", "img[src='x']") == [] and browser.execute_script("return window.__xss") is None
    except Exception:
        print(log.read_text(errors="replace")[-4000:], file=sys.stderr)
        raise
    finally:
        browser.switch_to.default_content()
        stop_process(locust, timeout=15)
        stop(server)
