"""Screenshots of the MCP tab of Locust's web UI and of a run's ``report.html`` for ``docs/`` (a
maintainer tool, not a test).

``python -m benchmarks.screenshots [--out docs] [--only tab|capacity|report ...]`` (after ``make
install`` and ``make chromium-install``) starts ``mcpfast serve --transport http`` and Locust web
UI runs of the native engine against it, all on 127.0.0.1, opens them in Debian's headless
Chromium once figures are in and writes:

* ``webui-mcp-tab.png``: the MCP tab during a tools/call run (the per-name µs table, the page below
  it: latency by percentile, p50/p99 per interval, handshake phases, the generator gauge);
* ``webui-mcp-capacity.png``: the MCP page during a capacity search (``shapes/capacity.py``), its
  curve after a few steps;
* ``report-page.png``: the top of ``report.html`` of a short ``mcpfast bench`` (tools_call and
  handshake over HTTP, 6 s each) against ``mcpfast serve``, opened from its file.

:func:`chromium` is the browser the tests of ``tests/webui`` drive too: one set of flags for a
headless Chromium on a machine with no network and, often, run as root.
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from mcpfast.bench.procs import child_env, free_port, stop_process, wait_port

__all__ = ["CHROMEDRIVER", "CHROMIUM", "CHROMIUM_FLAGS", "chromium", "main", "wait_for"]

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
#: Headless, as root (no sandbox), and quiet on a closed network: without the background
#: networking flags Chromium keeps opening connections that are refused.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


def chromium(width: int = 1400, height: int = 1000) -> Any:
    """A WebDriver session of Debian's headless Chromium with a new, empty profile (selenium,
    the test extra; ``make chromium-install`` installs the browser and its driver)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        raise RuntimeError(f"{CHROMIUM} and {CHROMEDRIVER} are needed: make chromium-install")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*CHROMIUM_FLAGS, f"--window-size={width},{height}", f"--user-data-dir={tempfile.mkdtemp(prefix='mcpfast-chromium-')}"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def wait_for(condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.2) -> Any:
    """Poll ``condition`` until it returns something true; RuntimeError naming ``what`` after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = condition()
        except Exception:  # a page still loading, a server not answering yet
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


@contextlib.contextmanager
def _run(files: Sequence[str], extra: Sequence[str], work: Path) -> Iterator[int]:
    """``mcpfast serve --transport http`` and a Locust web UI run of ``files`` against it
    (native engine, started at once); yields the web UI's port, stops both at the end."""
    port, web = free_port(), free_port()
    serve = [sys.executable, "-m", "mcpfast", "serve", "--transport", "http", "--host", "127.0.0.1", "--port", str(port)]
    server = subprocess.Popen(serve, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=child_env())
    run = None
    try:
        wait_port(port, server, timeout=30)
        cmd = [sys.executable, "-m", "locust", "-f", ",".join(str(ROOT / f) for f in files), "--autostart", "--web-host", "127.0.0.1"]
        cmd += ["--web-port", str(web), "--host", f"http://127.0.0.1:{port}/mcp", "--mcp-engine", "native", *extra]
        with (work / f"locust-{web}.log").open("wb") as log:  # kept in the work folder while the script runs
            run = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=child_env(), cwd=work)
        wait_port(web, run, timeout=60)
        yield web
    finally:
        if run is not None:
            stop_process(run)
        stop_process(server)


def _data(web: int) -> dict[str, Any]:
    import json

    with urllib.request.urlopen(f"http://127.0.0.1:{web}/mcp/data", timeout=5) as r:  # 127.0.0.1 only
        data: dict[str, Any] = json.loads(r.read())
        return data


def tab_shot(out: Path, browser: Any, work: Path) -> Path:
    with _run(["loadtests/tools_call.py"], ["-u", "8", "-r", "8", "-t", "60s"], work) as web:
        wait_for(lambda: len(_data(web)["timeline"]["series"][0]["points"]) >= 8, 60, "eight seconds of figures")
        browser.get(f"http://127.0.0.1:{web}/?tab=mcp")
        wait_for(lambda: browser.execute_script(_FRAME_READY), 30, "the tab's table and its page")
        return _shot(browser, out / "webui-mcp-tab.png")


def capacity_shot(out: Path, browser: Any, work: Path) -> Path:
    extra = ["--mcp-slo", "tools/call:echo p99 < 10ms", "--mcp-capacity-start", "250", "--mcp-capacity-warmup", "1"]
    extra += ["--mcp-capacity-steady", "3", "--mcp-capacity-max-time", "90"]
    with _run(["loadtests/tools_call.py", "shapes/capacity.py"], extra, work) as web:

        def steps() -> bool:  # four steps, or a search that ended after two
            capacity = _data(web)["capacity"] or {}
            done = len(capacity.get("steps", []))
            return done >= 4 or (done >= 2 and capacity.get("status") != "running")

        wait_for(steps, 120, "four capacity steps")
        browser.get(f"http://127.0.0.1:{web}/mcp")
        wait_for(lambda: browser.execute_script("return document.querySelectorAll('#capacity-chart svg g.series').length"), 30, "the curve")
        return _shot(browser, out / "webui-mcp-capacity.png")


_FRAME_READY = """
const frame = document.getElementById('mcpfast-mcp-frame');
const rows = document.querySelectorAll('#root table tbody tr').length;
return rows > 1 && frame && frame.contentDocument &&
       frame.contentDocument.querySelectorAll('#percentiles svg g.series').length > 0;
"""


def report_shot(out: Path, browser: Any, work: Path) -> Path:
    port = free_port()
    serve = [sys.executable, "-m", "mcpfast", "serve", "--transport", "http", "--host", "127.0.0.1", "--port", str(port)]
    server = subprocess.Popen(serve, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=child_env())
    try:
        wait_port(port, server, timeout=30)
        bench = [sys.executable, "-m", "mcpfast", "bench", "--target", f"http://127.0.0.1:{port}/mcp", "--server-pid", str(server.pid)]
        bench += ["--family", "tools_call", "--family", "handshake", "--duration", "6", "--users", "4", "--out", str(work / "quick-http")]
        subprocess.run(bench, check=True, stdout=subprocess.DEVNULL, env=child_env(), timeout=180)
    finally:
        stop_process(server)
    browser.set_window_size(1300, 1700)
    browser.get((work / "quick-http" / "report.html").as_uri())
    wait_for(lambda: browser.execute_script("return document.querySelectorAll('svg g.series').length"), 30, "the page's charts")
    browser.save_screenshot(str(out / "report-page.png"))
    return out / "report-page.png"


SHOTS = {"tab": tab_shot, "capacity": capacity_shot, "report": report_shot}


def _shot(browser: Any, path: Path) -> Path:
    """The whole page: the window grown to the document's height first (until it stops growing:
    the tab's frame follows its content every half second)."""
    height = 0
    for _ in range(10):
        now = int(browser.execute_script("return document.documentElement.scrollHeight"))
        if now == height:
            break
        height = now
        browser.set_window_size(1400, min(max(height + 40, 900), 3000))
        time.sleep(1.0)
    browser.save_screenshot(str(path))
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="where the PNGs go (default docs/)")
    parser.add_argument("--only", action="append", choices=sorted(SHOTS), help="make only this picture (repeatable; default all)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    browser = chromium()
    try:
        with tempfile.TemporaryDirectory(prefix="mcpfast-screenshots-") as work:
            for make in (SHOTS[name] for name in (args.only or SHOTS)):
                print(f"wrote {make(args.out, browser, Path(work))}")
    finally:
        browser.quit()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
