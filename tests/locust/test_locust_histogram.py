"""HDR histogram: accuracy, exact merging, serialisation, clamping, coordinated-omission back-fill."""

from __future__ import annotations

import json
import math
import random
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpfast.locust.histogram import (
    HIGHEST,
    SLOTS,
    Histogram,
    HistogramSet,
    highest_equivalent,
    index_of,
    lowest_equivalent,
)

PERCENTILES = [0.0, 1.0, 10.0, 25.0, 50.0, 75.0, 90.0, 99.0, 99.9, 99.99, 100.0]
values_st = st.lists(st.integers(min_value=1, max_value=HIGHEST), max_size=200)


def exact_percentile(sorted_values: list[int], p: float) -> int:
    """Nearest-rank percentile of the raw data."""
    rank = min(max(math.ceil(p / 100.0 * len(sorted_values) - 1e-9), 1), len(sorted_values))
    return sorted_values[rank - 1]


def histogram_of(values: list[int]) -> Histogram:
    h = Histogram()
    for v in values:
        h.record(v)
    return h


def test_layout_is_hdr_3_significant_digits() -> None:
    assert SLOTS == 17192  # 2048 exact slots + 1024 per further power of two, up to 60 s
    for v in (1, 2047, 2048, 2049, 4095, 4096, 123_456, 59_999_999, HIGHEST):
        i = index_of(v)
        assert lowest_equivalent(i) <= v <= highest_equivalent(i)
        # slot width relative to its values: below 1/1024 -> 3 significant digits
        assert highest_equivalent(i) - lowest_equivalent(i) + 1 <= max(1, lowest_equivalent(i) // 1024)
    # slots tile the range without gaps
    for i in range(1, SLOTS - 1):
        assert highest_equivalent(i) + 1 == lowest_equivalent(i + 1)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_percentiles_match_exact_within_3_significant_digits(seed: int) -> None:
    rng = random.Random(seed)
    values = [int(rng.lognormvariate(7.0, 1.5)) + 1 for _ in range(20_000)]  # ~1 µs .. seconds
    values += [rng.randint(1, HIGHEST) for _ in range(2_000)]
    values += [rng.randint(1, 3000) for _ in range(5_000)]
    h = histogram_of(values)
    values.sort()
    got = h.percentiles(PERCENTILES)
    for p, value in zip(PERCENTILES, got, strict=True):
        exact = exact_percentile(values, p)
        assert exact <= value <= exact + exact / 1024, (p, exact, value)
        assert h.value_at_percentile(p) == value
    assert h.min == values[0] and h.max == values[-1] and h.total_count == len(values)
    assert h.mean == pytest.approx(statistics.fmean(values), rel=1e-3)
    assert h.stdev == pytest.approx(statistics.pstdev(values), rel=1e-3)


def test_small_values_are_exact() -> None:
    values = list(range(1, 2048)) * 3
    h = histogram_of(values)
    values.sort()
    for p in PERCENTILES:
        assert h.value_at_percentile(p) == exact_percentile(values, p)


@settings(max_examples=60, deadline=None)
@given(values_st, st.integers(min_value=0, max_value=200), st.integers(min_value=1, max_value=4))
def test_merge_of_parts_equals_histogram_of_whole(values: list[int], cut: int, parts: int) -> None:
    whole = histogram_of(values)
    chunks = [values[i::parts] for i in range(parts)]
    merged = Histogram()
    for chunk in chunks:
        merged.merge(histogram_of(chunk))
    assert merged == whole
    assert merged.percentiles(PERCENTILES) == whole.percentiles(PERCENTILES)
    # merge is also exact after a serialisation round trip (what the master does)
    via_wire = Histogram()
    for chunk in chunks:
        via_wire.merge(Histogram.from_dict(json.loads(json.dumps(histogram_of(chunk).to_dict()))))
    assert via_wire == whole


@settings(max_examples=60, deadline=None)
@given(values_st)
def test_serialisation_round_trip(values: list[int]) -> None:
    h = histogram_of(values)
    h.record(HIGHEST * 2)  # with an overflow
    data = json.loads(json.dumps(h.to_dict()))
    back = Histogram.from_dict(data)
    assert back == h
    assert back.overflow == 1
    assert back.percentiles(PERCENTILES) == h.percentiles(PERCENTILES)


def test_serialisation_is_sparse_and_msgpack_safe() -> None:
    msgpack = pytest.importorskip("msgpack")
    h = histogram_of([5, 5, 5, 70_000, 1_000_000])
    data = h.to_dict()
    assert len(data["i"]) == len(data["c"]) == 3
    assert Histogram.from_dict(msgpack.loads(msgpack.dumps(data), raw=False)) == h
    with pytest.raises(ValueError, match="sum"):
        Histogram.from_dict({**data, "n": 99})


def test_clamping_and_overflow() -> None:
    h = Histogram()
    h.record(0)
    h.record(-7)
    h.record(HIGHEST + 1)
    h.record(10**12, count=2)
    assert h.total_count == 5
    assert h.min == 1 and h.max == HIGHEST
    assert h.overflow == 3
    assert h.count_at(1) == 2 and h.count_at(HIGHEST) == 3
    assert h.value_at_percentile(100) == HIGHEST
    h.record(1.6)  # floats round to the nearest µs
    assert h.count_at(2) == 1


def test_empty_and_reset() -> None:
    h = Histogram()
    assert h.percentiles([50, 99]) == [0, 0]
    assert (h.min, h.max, h.mean, h.stdev, h.total_count) == (0, 0, 0.0, 0.0, 0)
    h.record(123_456, count=10)
    h.reset()
    assert h == Histogram()
    with pytest.raises(ValueError):
        h.value_at_percentile(101)


def test_coordinated_omission_correction_on_a_stall() -> None:
    # 10 000 requests every 1 ms, answered in 100 µs, and one that stalled for 1 s
    plain, corrected = Histogram(), Histogram()
    for _ in range(10_000):
        plain.record(100)
        corrected.record_corrected(100, 1_000)
    plain.record(1_000_000)
    corrected.record_corrected(1_000_000, 1_000)
    assert plain.value_at_percentile(99) == 100  # the stall is invisible
    assert corrected.total_count == 10_000 + 1_000  # 999 back-filled sends + the stalled one
    p99 = corrected.value_at_percentile(99)
    assert 850_000 <= p99 <= 900_000  # rank 10 890 of 11 000: the 890th back-filled value, 890 ms
    assert corrected.max == 1_000_000 and corrected.min == 100


@settings(max_examples=60, deadline=None)
@given(
    st.integers(min_value=1, max_value=300_000),
    st.integers(min_value=0, max_value=3_000),
    st.integers(min_value=0, max_value=300_000),
)
def test_record_corrected_matches_naive_backfill(interval: int, multiple: int, rest: int) -> None:
    value = max(interval * multiple + rest % interval, 1)  # at most ~3000 back-filled samples
    fast = Histogram()
    fast.record_corrected(value, interval)
    naive = Histogram()
    naive.record(value)
    missing = value - interval
    while missing >= interval:
        naive.record(missing)
        missing -= interval
    assert fast == naive


def test_histogram_set_keys_merge_and_delta() -> None:
    a, b = HistogramSet(), HistogramSet()
    a.record("http", "tools/call:echo", 150)
    cached = a.get("http", "tools/call:echo")
    a.record("stdio", "tools/list", 90)
    b.record("http", "tools/call:echo", 3_000)
    b.record("http", "initialize", 1_200)
    whole = HistogramSet.from_dict(json.loads(json.dumps(a.to_dict()))).merge(HistogramSet.from_dict(b.to_dict()))
    assert len(whole) == 3
    assert whole.get("http", "tools/call:echo").total_count == 2
    assert ("http", "initialize") in whole and ("http", "nope") not in whole
    assert whole.total().total_count == whole.total_count == 4
    delta = a.take_delta()
    assert sum(h["n"] for h in delta["histograms"]) == 2
    assert a.total_count == 0
    cached.record(10)  # references handed out before the reset stay live
    assert a.get("http", "tools/call:echo").total_count == 1
    assert [key for key, _ in whole.items()] == sorted(key for key, _ in whole.items())
