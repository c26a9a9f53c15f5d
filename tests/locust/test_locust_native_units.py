"""The native engine's stats path on synthetic windows, and the HdrHistogram interval log."""

from __future__ import annotations

import base64
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from mcpfast import core
from mcpfast.locust import hlog
from mcpfast.locust.histogram import HIGHEST, Histogram

HERE = Path(__file__).resolve().parent


def _sample(seed: int, n: int) -> Histogram:
    r = random.Random(seed)
    h = Histogram()
    for _ in range(n):
        h.record(int(r.lognormvariate(6, 2)) + 1)
    return h


def _units(child_env, tmp_path: Path, *args: str) -> dict:
    """The JSON line ``_native_units.py`` prints (in a child interpreter: Locust patches the process)."""
    proc = subprocess.run(
        [sys.executable, str(HERE / "_native_units.py"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=child_env(),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_bulk_feed_equals_request_by_request_logging(child_env, tmp_path: Path) -> None:
    result = _units(child_env, tmp_path)
    assert result["added"] == result["n"] == 5000
    assert result["bulk"] == result["single"]
    assert result["bulk"]["Aggregated"]["num_requests"] == 5000
    assert result["bulk"]["errors"] and all(row[3] > 0 for row in result["bulk"]["errors"])
    assert result["custom_keys"] == [7]
    # a driver's µs histograms count every request once, empty polls in between and after
    drv = result["driver"]
    assert drv["hist"] == 5000, drv
    assert (drv["lag_n"], drv["sent"], drv["service_n"], drv["late"], drv["dropped"]) == (2, 2, 2, 3, 1), drv


@pytest.mark.skipif(not core.HAS_NATIVE_ENGINE, reason="the engine's config needs the compiled core")
def test_config_for_builds_the_typed_config_from_the_options(child_env, tmp_path: Path) -> None:
    got = _units(child_env, tmp_path, "configs")
    assert got["http"] == ["http", "http://127.0.0.1:1/mcp", {"x-api-key": "k"}, ["t"], 2, "session"]
    # closed model without --mcp-rate: the engine's own defaults
    assert got["http_defaults"] == ["mcp-http", None, {"text": "hello"}, "tools_call", [], 0.001]
    assert got["mixed"] == [["echo", None, {"text": "hello"}, 10], [None, "tools/list", None, 3]]
    rate, late_after_s, tolerance = got["mixed_open_model"]
    assert rate == 20.0 and late_after_s == tolerance  # this runner's share, one "late" for both engines
    assert got["stdio"] == ["stdio", None, ["srv", "--flag", "a b"], 4, "mcp-stdio", "handshake"]


@pytest.mark.parametrize("seed", [1, 2])
def test_hlog_encoding_round_trips(seed: int) -> None:
    h = _sample(seed, 20_000)
    h.record(HIGHEST)
    back = hlog.decode(hlog.encode(h))
    assert back._counts == h._counts and back.total_count == h.total_count
    assert back.percentiles([50, 99, 99.9]) == h.percentiles([50, 99, 99.9])


def test_hlog_empty_and_varint_edges() -> None:
    assert hlog.decode(hlog.encode(Histogram())).total_count == 0
    for value in (0, 1, -1, 63, -64, 2**31, -(2**40), 2**62, -(2**63)):
        buf = bytearray()
        hlog._put_varint(buf, value)
        assert len(buf) <= 9
        assert hlog._get_varint(bytes(buf), 0) == (value, len(buf))
    with pytest.raises(ValueError, match="not a V2"):
        hlog.decode(b"\x00\x00\x00\x01" + b"\x00" * 40)


def test_hlog_is_read_by_hdrhistogram_itself(tmp_path: Path) -> None:
    """An independent implementation (the ``hdrhistogram`` package) reads our encoding and log."""
    hdrh = pytest.importorskip("hdrh.histogram", reason="the hdrhistogram package is a test dependency")
    from hdrh.log import HistogramLogReader

    log = hlog.IntervalLog()
    parts = [_sample(s, 3000) for s in range(3)]
    for i, h in enumerate(parts):
        log.add(hlog.tag_of("mcp-http", "tools/call:echo (first)"), 1000.0 + i, 1001.0 + i, h)
    path = log.write(str(tmp_path / "x.hlog"))
    theirs = hdrh.HdrHistogram.decode(base64.b64encode(hlog.encode(parts[0])))
    assert theirs.get_total_count() == parts[0].total_count
    assert [theirs.get_value_at_percentile(p) for p in (50, 90, 99)] == parts[0].percentiles([50, 90, 99])
    reader = HistogramLogReader(path, hdrh.HdrHistogram(1, HIGHEST, 3))
    total = 0
    try:
        while (got := reader.get_next_interval_histogram()) is not None:
            total += got.get_total_count()
    finally:
        reader.close()
    assert total == sum(h.total_count for h in parts)
    ours = hlog.read_log(Path(path).read_text().splitlines())
    assert [row[0] for row in ours] == ["mcp-http:tools/call:echo_(first)"] * 3
    assert [row[1] for row in ours] == [1000.0, 1001.0, 1002.0]
    merged = Histogram()
    for row in ours:
        merged.merge(row[4])
    expected = Histogram()
    for h in parts:
        expected.merge(h)
    assert merged._counts == expected._counts


def test_minus_gives_exact_interval_deltas() -> None:
    h = _sample(3, 1000)
    snapshot = h.copy()
    more = _sample(4, 500)
    h.merge(more)
    delta = h.minus(snapshot)
    assert delta._counts == more._counts and delta.total_count == 500
