"""The MCP tab's figures on a master (``--processes 2``) running the Python engine: the rows and
the page's data are the workers' merged µs histograms, and the generator gauge has one reading
per worker, sent with its reports (read over HTTP from the master's web UI; the browser test
reads the same routes drawn)."""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path
from typing import Any

from _support import REPO_ROOT, child_env, free_port, locust_master_args, start_process, start_reference_server, stop, stop_process

from benchmarks.screenshots import wait_for

CALL = "tools/call:echo"


def get(web: int, path: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{web}{path}", timeout=10) as r:  # 127.0.0.1 only
        return json.loads(r.read())


def test_a_master_shows_its_workers_figures_and_their_generator_gauge(tmp_path: Path) -> None:
    server, url = start_reference_server()
    web = free_port()
    cmd = [sys.executable, "-m", "locust", "-f", str(REPO_ROOT / "loadtests" / "tools_call.py"), "--processes", "2"]
    cmd += [*locust_master_args(), "--autostart", "-u", "4", "-r", "4", "-t", "30s", "--web-host", "127.0.0.1", "--web-port", str(web)]
    cmd += ["--host", url, "--mcp-engine", "python"]
    log = tmp_path / "locust.log"
    with log.open("wb") as out:
        locust = start_process(cmd, web, "locust --processes 2 with the web UI", env=child_env(), cwd=tmp_path, stderr=out)
    try:
        # two workers' reports (every 3 s each) with calls in them, and a reading of each one's busiest thread
        data = wait_for(
            lambda: (
                (d := get(web, "/mcp/data"))["requests"] > 0
                and len([p for p in d["generator"]["processes"] if p["share"] is not None]) == 2
                and d
            ),
            40,
            "two workers' figures",
        )
        assert data["runner"] == "master" and data["state"] == "running"
        gauge = data["generator"]
        assert gauge["share"] == max(p["share"] for p in gauge["processes"]) and 0 < gauge["share"] <= 1
        assert gauge["red"] == (gauge["share"] >= gauge["busy_at"])
        call = next(r for r in data["rows"] if r["name"] == CALL)
        assert call["type"] == "mcp-http" and call["requests"] > 0 and call["us"]["p50"] <= call["us"]["p99"] <= call["us"]["max"]
        # the tab's rows ride on Locust's own /stats/requests: the same merged histograms
        tab = {r["name"]: r for r in get(web, "/stats/requests")["extended_stats"][0]["data"]}
        assert int(tab[CALL]["requests"].replace(",", "")) >= call["requests"]
        assert data["percentiles"]["series"] and data["percentiles"]["empty"] is None
    except Exception:
        print(log.read_text(errors="replace")[-4000:], file=sys.stderr)
        raise
    finally:
        stop_process(locust, timeout=15)
        stop(server)
