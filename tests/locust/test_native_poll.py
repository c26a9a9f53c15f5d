"""Locust's tables and the µs histograms of the native driver count the same requests after every
poll, an empty one included (a drain with no row once fed the engine's cumulative
histograms a second time, so ``_histograms.json`` counted more than the CSV, HTML and JSON)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.mark.timeout(120)
def test_every_poll_feeds_locust_and_the_histograms_the_same_requests(child_env) -> None:
    proc = subprocess.run([sys.executable, str(HERE / "_native_poll.py")], capture_output=True, text=True, timeout=100, env=child_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    polls = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(polls) == 4  # three polls (the second drains nothing) and finish()'s final drain
    for seen in polls:
        assert seen["locust"] == seen["histograms"], polls
    assert polls[1] == polls[0]  # the empty drain added nothing anywhere
    assert polls[-1]["locust"] == {"initialize": 12, "notifications/initialized": 8, "tools/call:echo (first)": 8}
