"""HDR-style latency histograms with 1 µs resolution (pure Python, no Locust import).

Layout (the HdrHistogram scheme for lowest=1, 3 significant digits, written from scratch):

* Values are integers in microseconds, clamped to ``[1, HIGHEST]`` (``HIGHEST`` = 60 s);
  values above the range are counted at ``HIGHEST`` *and* in ``overflow``.
* ``SUB_BUCKETS = 2048`` linear slots per power of two.  Values below 2048 get one slot each
  (exact).  A value ``v >= 2048`` lives in "magnitude" ``m = v.bit_length() - 11`` where slots are
  ``2**m`` µs wide, at index ``(m << 10) + (v >> m)``.  Every slot above 2048 is therefore at most
  ``1/1024`` of its value wide: relative error below 0.1 %, i.e. 3 significant digits.
* 60 s needs ``m = 15`` (index ``(15 << 10) + (60_000_000 >> 15) = 17191``), so the whole range
  is 17192 counters, a plain Python list; ``record`` is a couple of integer operations and one list increment.

Merging adds counters slot by slot, so the merge of per-worker histograms equals the histogram of
all samples exactly.  ``to_dict`` emits only non-zero slots (delta-encoded indexes plus counts),
JSON- and msgpack-safe (string keys, lists of ints).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator

__all__ = [
    "HIGHEST",
    "LOWEST",
    "SUB_BUCKETS",
    "Histogram",
    "HistogramSet",
    "highest_equivalent",
    "index_of",
    "lowest_equivalent",
]

LOWEST = 1
HIGHEST = 60_000_000  # 60 s in µs
SIGNIFICANT_DIGITS = 3
SUB_BUCKETS = 2048  # 2 ** ceil(log2(2 * 10 ** 3))
_HALF = SUB_BUCKETS // 2  # 1024
_SUB_BITS = 11  # SUB_BUCKETS == 1 << _SUB_BITS
FORMAT_VERSION = 1


def index_of(value: int) -> int:
    """Slot index of an in-range value (``1 <= value <= HIGHEST``)."""
    if value < SUB_BUCKETS:
        return value
    shift = value.bit_length() - _SUB_BITS
    return (shift << 10) + (value >> shift)


def _shift_of_index(index: int) -> int:
    return 0 if index < SUB_BUCKETS else (index >> 10) - 1


def lowest_equivalent(index: int) -> int:
    """Smallest value that lands in slot ``index``."""
    shift = _shift_of_index(index)
    return (index - (shift << 10)) << shift


def highest_equivalent(index: int) -> int:
    """Largest value that lands in slot ``index``."""
    shift = _shift_of_index(index)
    return (((index - (shift << 10)) + 1) << shift) - 1


def _median_equivalent(index: int) -> float:
    shift = _shift_of_index(index)
    low = (index - (shift << 10)) << shift
    return low + ((1 << shift) - 1) / 2.0


SLOTS = index_of(HIGHEST) + 1  # 17192 with the default range


class Histogram:
    """Latency histogram, values in integer microseconds.

    Not thread-safe (one per greenlet hub is the intended use; gevent never preempts
    inside :meth:`record`).
    """

    __slots__ = ("_counts", "_max", "_min", "_top", "overflow", "total_count")

    def __init__(self) -> None:
        self._counts: list[int] = [0] * SLOTS
        self.total_count = 0
        self.overflow = 0
        self._min = HIGHEST + 1  # sentinel: empty
        self._max = 0
        self._top = 0  # highest non-zero slot index (bounds scans)

    # -- recording (hot path) ------------------------------------------------------------
    def record(self, us: int, count: int = 1) -> None:
        """Record ``count`` occurrences of ``us`` microseconds (clamped to [1, 60 s]).

        ``us`` should be an int; a float is rounded to the nearest microsecond.
        """
        if us.__class__ is not int:
            us = int(us + 0.5) if us > 0 else 0
        if us < SUB_BUCKETS:
            if us < 1:
                us = 1
            index = us
        else:
            if us > HIGHEST:
                us = HIGHEST
                self.overflow += count
            shift = us.bit_length() - _SUB_BITS
            index = (shift << 10) + (us >> shift)
        self._counts[index] += count
        self.total_count += count
        if us < self._min:
            self._min = us
        if us > self._max:
            self._max = us
            if index > self._top:
                self._top = index

    def record_corrected(self, us: int, expected_interval_us: int) -> None:
        """Record ``us`` and back-fill the samples a stalled closed loop failed to send.

        HdrHistogram's coordinated-omission correction: if a request took longer than the
        expected interval between requests, the requests that *would* have been issued during
        the stall are recorded too, with latencies ``us - k*interval`` for every
        ``k >= 1`` while that value is ``>= interval``.  The back-fill is added one slot at a
        time (arithmetic progression per slot), so a 60 s stall at 1 µs intervals costs at most
        one step per slot, not 60 million.
        """
        us = int(us)
        self.record(us)
        interval = int(expected_interval_us)
        if interval <= 0 or us <= interval:
            return
        value = us - interval  # largest missing sample
        if value > HIGHEST:  # back-filled values beyond the range are clamped like record() does
            over = (value - HIGHEST - 1) // interval + 1
            self.record(HIGHEST, over)
            self.overflow += over
            value -= over * interval
        counts = self._counts
        added = 0
        smallest = value
        while value >= interval:
            index = index_of(value)
            low = max(lowest_equivalent(index), interval)
            n = (value - low) // interval + 1
            counts[index] += n
            added += n
            smallest = value - (n - 1) * interval
            value -= n * interval
        if added:
            self.total_count += added
            if smallest < self._min:
                self._min = smallest
            # the largest back-filled value is below ``us``, which record() already saw

    # -- queries ---------------------------------------------------------------------------
    @property
    def min(self) -> int:
        return self._min if self.total_count else 0

    @property
    def max(self) -> int:
        return self._max

    def nonzero(self) -> Iterator[tuple[int, int]]:
        """``(slot index, count)`` of every slot holding samples, lowest first."""
        counts = self._counts
        for index in range(self._top + 1):
            c = counts[index]
            if c:
                yield index, c

    @property
    def mean(self) -> float:
        """Mean in µs, from slot midpoints (error < 0.05 % above 2 ms, exact below)."""
        if not self.total_count:
            return 0.0
        total = 0.0
        for index, c in self.nonzero():
            total += _median_equivalent(index) * c
        return total / self.total_count

    @property
    def stdev(self) -> float:
        """Population standard deviation in µs, from slot midpoints."""
        n = self.total_count
        if not n:
            return 0.0
        mean = self.mean
        acc = 0.0
        for index, c in self.nonzero():
            d = _median_equivalent(index) - mean
            acc += d * d * c
        return math.sqrt(acc / n)

    def _rank(self, p: float) -> int:
        # nearest-rank: the ceil(p/100 * n)-th smallest sample (at least the first)
        rank = math.ceil(p / 100.0 * self.total_count - 1e-9)
        return min(max(rank, 1), self.total_count)

    def value_at_percentile(self, p: float) -> int:
        """Value (µs) at percentile ``p`` (0..100), nearest rank, slot's highest value.

        The result is never below the exact nearest-rank sample and at most 1/1024 above it,
        and is kept inside ``[min, max]``.
        """
        return self.percentiles([p])[0]

    def percentiles(self, ps: Iterable[float]) -> list[int]:
        """Values at several percentiles in one pass over the counters."""
        ps = list(ps)
        for p in ps:
            if not 0.0 <= p <= 100.0:
                raise ValueError(f"percentile out of range: {p!r}")
        if not self.total_count:
            return [0] * len(ps)
        order = sorted(range(len(ps)), key=lambda i: ps[i])
        out = [0] * len(ps)
        counts = self._counts
        lo, hi = self._min, self._max
        k = 0
        target = self._rank(ps[order[0]])
        cumulative = 0
        for index in range(self._top + 1):
            c = counts[index]
            if not c:
                continue
            cumulative += c
            while cumulative >= target:
                value = highest_equivalent(index)
                out[order[k]] = lo if value < lo else hi if value > hi else value
                k += 1
                if k == len(ps):
                    return out
                target = self._rank(ps[order[k]])
        while k < len(ps):  # only reachable on inconsistent state; report max
            out[order[k]] = hi
            k += 1
        return out

    def count_at(self, us: int) -> int:
        """Count recorded in the slot that ``us`` maps to."""
        return self._counts[index_of(min(max(int(us), 1), HIGHEST))]

    # -- combination -------------------------------------------------------------------------
    def merge(self, other: Histogram) -> Histogram:
        """Add ``other``'s counts into this histogram (exact); returns ``self``."""
        if not other.total_count:
            return self
        mine = self._counts
        for index, c in other.nonzero():
            mine[index] += c
        self.total_count += other.total_count
        self.overflow += other.overflow
        if other._min < self._min:
            self._min = other._min
        if other._max > self._max:
            self._max = other._max
        if other._top > self._top:
            self._top = other._top
        return self

    def copy(self) -> Histogram:
        return Histogram().merge(self)

    def minus(self, earlier: Histogram) -> Histogram:
        """``self - earlier`` slot by slot, where ``earlier`` is an earlier state of ``self``
        (a new histogram; min and max are those of the slots that remain)."""
        top = self._top + 1
        counts = [x - y for x, y in zip(self._counts[:top], earlier._counts[:top], strict=True)]
        counts.extend([0] * (SLOTS - top))
        out = Histogram.from_counts(counts)
        out.overflow = self.overflow - earlier.overflow
        return out

    @classmethod
    def from_counts(cls, counts: list[int]) -> Histogram:
        """A histogram over a full slot array (``SLOTS`` long, taken over, not copied); min and
        max become the lowest/highest equivalent values of the first/last non-zero slot."""
        if len(counts) != SLOTS or any(c < 0 for c in counts):
            raise ValueError(f"a counts array has {SLOTS} non-negative slots")
        h = cls()
        h._counts = counts
        nonzero = [i for i, c in enumerate(counts) if c]
        h.total_count = sum(counts)
        if nonzero:
            h._min = lowest_equivalent(nonzero[0])
            h._max = min(highest_equivalent(nonzero[-1]), HIGHEST)
            h._top = nonzero[-1]
        return h

    def reset(self) -> None:
        counts = self._counts
        for index in range(self._top + 1):
            counts[index] = 0
        self.total_count = 0
        self.overflow = 0
        self._min = HIGHEST + 1
        self._max = 0
        self._top = 0

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Histogram):
            return NotImplemented
        return (
            self.total_count == other.total_count
            and self.overflow == other.overflow
            and self.min == other.min
            and self.max == other.max
            and self._counts == other._counts
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Histogram(count={self.total_count}, min={self.min}, max={self.max}, overflow={self.overflow})"

    # -- serialisation -------------------------------------------------------------------------
    def to_dict(self) -> dict:
        """Compact sparse form: ``i`` = delta-encoded non-zero slot indexes, ``c`` = counts."""
        indexes: list[int] = []
        counts: list[int] = []
        previous = 0
        for index, c in self.nonzero():
            indexes.append(index - previous)
            counts.append(c)
            previous = index
        return {
            "v": FORMAT_VERSION,
            "unit": "us",
            "sig": SIGNIFICANT_DIGITS,
            "highest": HIGHEST,
            "n": self.total_count,
            "min": self.min,
            "max": self._max,
            "overflow": self.overflow,
            "i": indexes,
            "c": counts,
        }

    @classmethod
    def from_dict(cls, data: dict) -> Histogram:
        if data.get("v") != FORMAT_VERSION or data.get("highest", HIGHEST) != HIGHEST:
            raise ValueError("incompatible histogram serialisation")
        h = cls()
        counts = h._counts
        index = 0
        total = 0
        for delta, c in zip(data["i"], data["c"], strict=True):
            index += delta
            counts[index] += c
            total += c
        if total != data["n"]:
            raise ValueError(f"histogram counts sum to {total}, header says {data['n']}")
        h.total_count = total
        h.overflow = data.get("overflow", 0)
        h._top = index
        if total:
            h._min = data["min"]
            h._max = data["max"]
        return h


class HistogramSet:
    """Histograms keyed by ``(request_type, name)``; nested dicts so lookups allocate nothing."""

    __slots__ = ("_by_type",)

    def __init__(self) -> None:
        self._by_type: dict[str, dict[str, Histogram]] = {}

    def get(self, request_type: str, name: str) -> Histogram:
        """The histogram for a key, created on first use (callers may cache it)."""
        names = self._by_type.get(request_type)
        if names is None:
            names = self._by_type[request_type] = {}
        h = names.get(name)
        if h is None:
            h = names[name] = Histogram()
        return h

    def record(self, request_type: str, name: str, us: int, count: int = 1) -> None:
        names = self._by_type.get(request_type)
        if names is not None:
            h = names.get(name)
            if h is not None:
                h.record(us, count)
                return
        self.get(request_type, name).record(us, count)

    def items(self) -> Iterator[tuple[tuple[str, str], Histogram]]:
        for request_type in sorted(self._by_type):
            names = self._by_type[request_type]
            for name in sorted(names):
                yield (request_type, name), names[name]

    def __len__(self) -> int:
        return sum(len(v) for v in self._by_type.values())

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, tuple) or len(key) != 2:
            return False
        return key[1] in self._by_type.get(key[0], {})

    @property
    def total_count(self) -> int:
        return sum(h.total_count for _, h in self.items())

    def total(self) -> Histogram:
        """All keys merged into one histogram."""
        out = Histogram()
        for _, h in self.items():
            out.merge(h)
        return out

    def merge(self, other: HistogramSet) -> HistogramSet:
        for (request_type, name), h in other.items():
            self.get(request_type, name).merge(h)
        return self

    def reset(self) -> None:
        """Zero every histogram in place (cached references stay valid)."""
        for _, h in self.items():
            h.reset()

    def to_dict(self, include_empty: bool = False) -> dict:
        return {
            "v": FORMAT_VERSION,
            "histograms": [
                {"type": request_type, "name": name, **h.to_dict()}
                for (request_type, name), h in self.items()
                if include_empty or h.total_count
            ],
        }

    @classmethod
    def from_dict(cls, data: dict) -> HistogramSet:
        if data.get("v") != FORMAT_VERSION:
            raise ValueError("incompatible histogram set serialisation")
        out = cls()
        for entry in data["histograms"]:
            out.get(entry["type"], entry["name"]).merge(Histogram.from_dict(entry))
        return out

    def take_delta(self) -> dict:
        """Serialise non-empty histograms, then reset in place (for periodic worker reports)."""
        data = self.to_dict()
        if data["histograms"]:
            self.reset()
        return data
