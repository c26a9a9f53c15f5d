"""The exporter's pure parts: the bucket bounds, counting a µs histogram into them, the address
option, and the collector's text over hand-built tables (no Locust in this process; the runs
against a real Prometheus are in tests/loadtests/test_swarm_prometheus.py)."""

from __future__ import annotations

import argparse
import itertools
from types import SimpleNamespace

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from mcpfast.locust.argtypes import listen_address
from mcpfast.locust.histogram import HIGHEST, Histogram, HistogramSet
from mcpfast.locust.prometheus import BUCKETS_US, SwarmCollector, add_to_buckets, cumulative

DURATION = "mcpfast_swarm_request_duration_microseconds"


def scrape(registry: CollectorRegistry) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """The registry's text as parsed back by prometheus-client: ``{(sample, labels): value}``."""
    text = generate_latest(registry).decode()
    return {(s.name, frozenset(s.labels.items())): s.value for family in text_string_to_metric_families(text) for s in family.samples}


def sample(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], metric: str, /, **labels: str) -> float:
    return samples[(metric, frozenset(labels.items()))]


def test_bounds_are_round_and_roughly_logarithmic_from_50_us_to_60_s() -> None:
    assert BUCKETS_US[0] == 50 and BUCKETS_US[-1] == HIGHEST == 60_000_000
    assert len(BUCKETS_US) == 38
    ratios = [b / a for a, b in itertools.pairwise(BUCKETS_US)]
    assert all(1.2 <= r <= 1.7 for r in ratios), ratios
    assert {200, 1_000, 5_000, 1_000_000} <= set(BUCKETS_US)


def test_samples_land_at_or_below_their_bound() -> None:
    h = Histogram()
    for us in (1, 50, 51, 70, 2_000, 2_001, 59_999_999, 61_000_000):
        h.record(us)
    counts = [0] * (len(BUCKETS_US) + 1)
    total = add_to_buckets(h, counts)
    buckets = dict(cumulative(counts))
    assert buckets["50"] == 2  # 1 and 50: exact below 2,048 µs
    assert buckets["70"] == 4
    assert buckets["1500"] == 4 and buckets["2000"] == 5 and buckets["3000"] == 6
    assert buckets["50000000"] == 6 and buckets[str(HIGHEST)] == 8  # beyond 60 s: counted at the top
    assert buckets["+Inf"] == h.total_count == 8
    assert counts[-1] == 0
    assert total == pytest.approx(h.mean * h.total_count)


def test_a_bound_above_2048_us_is_within_one_slot() -> None:
    h = Histogram()
    h.record(5_000)
    h.record(5_010)
    counts = [0] * (len(BUCKETS_US) + 1)
    add_to_buckets(h, counts)
    buckets = dict(cumulative(counts))
    assert buckets["5000"] == 1 and buckets["7000"] == 2


def test_listen_address() -> None:
    assert listen_address("9646") == ("", 9646)
    assert listen_address("127.0.0.1:9646") == ("127.0.0.1", 9646)
    assert listen_address("[::1]:9646") == ("::1", 9646)
    for bad in ("http", "0", "70000", "host:"):
        with pytest.raises(argparse.ArgumentTypeError):
            listen_address(bad)


def test_collector_reads_the_live_tables_at_scrape_time() -> None:
    ok, failed = HistogramSet(), HistogramSet()
    entries = {}
    environment = SimpleNamespace(stats=SimpleNamespace(entries=entries), runner=SimpleNamespace(user_count=3))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SwarmCollector(environment, SimpleNamespace(ok=ok, failed=failed), "t1"))
    assert sample(scrape(registry), "mcpfast_swarm_users", testid="t1") == 3
    # rows added after registration show at the next scrape
    entries[("tools/call:echo", "mcp-http")] = SimpleNamespace(method="mcp-http", name="tools/call:echo", num_requests=5, num_failures=2)
    for us in (100, 200, 300):
        ok.record("mcp-http", "tools/call:echo", us)
    for us in (40, 90_000):
        failed.record("mcp-http", "tools/call:echo", us)
    samples = scrape(registry)
    row = {"type": "mcp-http", "name": "tools/call:echo", "testid": "t1"}
    assert sample(samples, "mcpfast_swarm_requests_total", **row) == 5
    assert sample(samples, "mcpfast_swarm_failures_total", **row) == 2
    assert sample(samples, f"{DURATION}_count", **row) == 5
    assert sample(samples, f"{DURATION}_bucket", **row, le="50") == 1
    assert sample(samples, f"{DURATION}_bucket", **row, le="300") == 4
    assert sample(samples, f"{DURATION}_bucket", **row, le="70000") == 4
    assert sample(samples, f"{DURATION}_bucket", **row, le="+Inf") == 5
    assert sample(samples, f"{DURATION}_sum", **row) == pytest.approx(100 + 200 + 300 + 40 + 90_000, rel=1e-3)
