"""HdrHistogram interval logs (``.hlog``) for the µs histograms of :mod:`mcpfast.locust.histogram`.

Pure Python (``zlib``, ``base64``, ``struct``), no Locust import.  The slot layout of
:class:`~mcpfast.locust.histogram.Histogram` is HdrHistogram's own for ``lowest = 1``,
``highest = 60 s``, 3 significant digits, so a histogram's slot array *is* an HdrHistogram counts
array and encodes without conversion:

* **V2 encoding** (what HdrHistogram's ``encodeIntoByteBuffer`` writes): a 40-byte big-endian
  header - cookie ``0x1c849313``, payload length, normalizing index offset (0), significant
  digits, lowest discernible value, highest trackable value (int64 each), integer-to-double
  ratio (float64 1.0) - then the counts as ZigZag LEB128 varints (at most 9 bytes each), where a
  run of ``k > 1`` empty slots is written as ``-k``.
* **V2 compressed**: cookie ``0x1c849314``, length of the deflated bytes, then the zlib-deflated
  V2 encoding.  An interval line carries it base64-encoded (the ``HISTFAA...`` strings).
* **Interval log** (format version 1.3, what ``HistogramLogReader``/``HistogramLogProcessor`` and
  the HdrHistogram plotters read): ``#[StartTime: ...]`` and ``#[BaseTime: ...]`` comments, the
  CSV legend, then one line per interval and tag:
  ``Tag=<tag>,<start s relative to BaseTime>,<length s>,<max in ms>,<base64 histogram>``.
  Values are µs, so the max column divides by 1000 (``maxValueUnitRatio``) to print ms.

:func:`decode` and :func:`read_log` reverse all of it (used by the tests and by anyone checking a
log without Java).
"""

from __future__ import annotations

import base64
import re
import struct
import time
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from mcpfast.locust.histogram import HIGHEST, LOWEST, SIGNIFICANT_DIGITS, SLOTS, Histogram

__all__ = [
    "COMPRESSED_COOKIE",
    "ENCODING_COOKIE",
    "Interval",
    "IntervalLog",
    "decode",
    "decode_counts",
    "encode",
    "encode_counts",
    "read_log",
    "tag_of",
]

ENCODING_COOKIE = 0x1C849303 | 0x10  # V2, word size 8 (the 0x10 marks the ZigZag LEB128 payload)
COMPRESSED_COOKIE = 0x1C849304 | 0x10
_HEADER = struct.Struct(">iiiiqqd")  # cookie, payload length, offset, digits, lowest, highest, ratio
_COMPRESSED_HEADER = struct.Struct(">ii")
LOG_VERSION = "1.3"
MAX_UNIT_RATIO = 1000.0  # µs -> ms in the Interval_Max column
LEGEND = '"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"'
_TAG_BAD = re.compile(r"[\s,=]")  # a tag may hold no comma, space or '=' (the log's separators)


def tag_of(request_type: str, name: str, failed: bool = False) -> str:
    """The log tag of one stats key: ``<type>:<name>`` with separators replaced by ``_``."""
    tag = _TAG_BAD.sub("_", f"{request_type}:{name}")
    return tag + ":failed" if failed else tag


# -- ZigZag LEB128 ----------------------------------------------------------------------------------
def _put_varint(out: bytearray, value: int) -> None:
    z = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF  # ZigZag, 64-bit
    for _ in range(8):
        if z < 0x80:
            out.append(z)
            return
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z & 0xFF)  # the 9th byte carries 8 bits


def _get_varint(data: bytes, pos: int) -> tuple[int, int]:
    z = 0
    shift = 0
    for i in range(9):
        b = data[pos]
        pos += 1
        if i == 8:
            z |= b << 56
            break
        z |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
    value = (z >> 1) ^ -(z & 1)
    return value, pos


def encode_counts(counts: list[int]) -> bytes:
    """V2 payload of a counts array (up to its last non-zero slot)."""
    top = len(counts) - 1
    while top >= 0 and not counts[top]:
        top -= 1
    out = bytearray()
    i = 0
    while i <= top:
        c = counts[i]
        i += 1
        if c:
            _put_varint(out, c)
            continue
        zeros = 1
        while i <= top and not counts[i]:
            zeros += 1
            i += 1
        _put_varint(out, -zeros if zeros > 1 else 0)
    return bytes(out)


def decode_counts(payload: bytes, slots: int = SLOTS) -> list[int]:
    counts = [0] * slots
    pos = index = 0
    while pos < len(payload):
        value, pos = _get_varint(payload, pos)
        if value < 0:
            index += -value
            continue
        if index >= slots:
            raise ValueError(f"hlog payload writes slot {index}, beyond the {slots} of the layout")
        counts[index] = value
        index += 1
    return counts


# -- histograms -----------------------------------------------------------------------------------
def encode(h: Histogram) -> bytes:
    """V2 *compressed* encoding of a histogram (the bytes an interval line base64-encodes)."""
    payload = encode_counts(h._counts)
    raw = _HEADER.pack(ENCODING_COOKIE, len(payload), 0, SIGNIFICANT_DIGITS, LOWEST, HIGHEST, 1.0) + payload
    deflated = zlib.compress(raw)
    return _COMPRESSED_HEADER.pack(COMPRESSED_COOKIE, len(deflated)) + deflated


def decode(data: bytes) -> Histogram:
    """Inverse of :func:`encode` (also reads an uncompressed V2 encoding)."""
    cookie = struct.unpack_from(">i", data)[0]
    if cookie == COMPRESSED_COOKIE:
        _, length = _COMPRESSED_HEADER.unpack_from(data)
        data = zlib.decompress(data[_COMPRESSED_HEADER.size : _COMPRESSED_HEADER.size + length])
        cookie = struct.unpack_from(">i", data)[0]
    if cookie != ENCODING_COOKIE:
        raise ValueError(f"not a V2 HdrHistogram encoding (cookie {cookie:#x})")
    _, length, offset, digits, lowest, highest, _ratio = _HEADER.unpack_from(data)
    if (offset, digits, lowest, highest) != (0, SIGNIFICANT_DIGITS, LOWEST, HIGHEST):
        raise ValueError(
            f"histogram layout lowest={lowest} highest={highest} digits={digits} offset={offset}"
            f" differs from mcpfast's ({LOWEST}, {HIGHEST}, {SIGNIFICANT_DIGITS}, 0)"
        )
    counts = decode_counts(data[_HEADER.size : _HEADER.size + length])
    return Histogram.from_counts(counts)


# -- interval logs --------------------------------------------------------------------------------
@dataclass
class Interval:
    start: float  # epoch seconds
    length: float  # seconds
    tag: str
    histogram: Histogram


class IntervalLog:
    """Intervals gathered during a run, written as one ``.hlog`` file at the end.

    :meth:`add` takes a per-interval histogram (a delta, not a cumulative one); empty histograms
    are skipped.  The sum of a tag's intervals is the run's histogram for that key.
    """

    def __init__(self) -> None:
        self.intervals: list[Interval] = []
        self.start_time: float | None = None

    def reset(self, start_time: float | None = None) -> None:
        self.intervals = []
        self.start_time = start_time

    def add(self, tag: str, start: float, end: float, histogram: Histogram) -> None:
        if not histogram.total_count:
            return
        if self.start_time is None or start < self.start_time:
            self.start_time = start
        self.intervals.append(Interval(start, max(end - start, 0.0), tag, histogram))

    def lines(self) -> Iterator[str]:
        base = self.start_time if self.start_time is not None else time.time()
        stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime(base))
        yield f"#[Histogram log format version {LOG_VERSION}]"
        yield "#[Written by mcpfast; values in microseconds, Interval_Max in milliseconds]"
        yield f"#[StartTime: {base:.3f} (seconds since epoch), {stamp}]"
        yield f"#[BaseTime: {base:.3f} (seconds since epoch)]"
        yield LEGEND
        for iv in sorted(self.intervals, key=lambda iv: (iv.start, iv.tag)):
            blob = base64.b64encode(encode(iv.histogram)).decode("ascii")
            yield (f"Tag={iv.tag},{iv.start - base:.3f},{iv.length:.3f},{iv.histogram.max / MAX_UNIT_RATIO:.3f},{blob}")

    def write(self, path: str) -> str:
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="ascii") as fh:
            for line in self.lines():
                fh.write(line + "\n")
        import os

        os.replace(tmp, path)
        return path


def read_log(lines: Iterable[str]) -> list[tuple[str | None, float, float, float, Histogram]]:
    """Parse an interval log: ``(tag, absolute start s, length s, max ms, histogram)`` per line."""
    base = 0.0
    start_time = None
    out = []
    for line in lines:
        line = line.strip()
        if not line:
            continue
        if line.startswith("#"):
            m = re.match(r"#\[(StartTime|BaseTime): ([0-9.]+)", line)
            if m and m.group(1) == "BaseTime":
                base = float(m.group(2))
            elif m:
                start_time = float(m.group(2))
            continue
        if line.startswith('"StartTimestamp"'):
            continue
        tag = None
        if line.startswith("Tag="):
            tag, line = line[4:].split(",", 1)
        start, length, max_ms, blob = line.split(",", 3)
        origin = base if base else (start_time or 0.0)
        out.append((tag, origin + float(start), float(length), float(max_ms), decode(base64.b64decode(blob))))
    return out
