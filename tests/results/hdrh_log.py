"""An interval log read by the ``hdrhistogram`` package (an implementation nobody here wrote), for
the tests that check what a timeline draws against what the ``.hlog`` holds."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest


def histograms(path: str | Path) -> dict[str, list[tuple[float, float, Any]]]:
    """``{tag: [(start s, length s, HdrHistogram)]}`` of every interval line (start in epoch
    seconds), decoded by HdrHistogram's own Python decoder."""
    hdrh = pytest.importorskip("hdrh.histogram", reason="the hdrhistogram package is a test dependency")
    base = 0.0
    out: dict[str, list[tuple[float, float, Any]]] = {}
    for line in Path(path).read_text(encoding="ascii").splitlines():
        found = re.match(r"#\[BaseTime: ([0-9.]+)", line)
        if found:
            base = float(found.group(1))
        if line.startswith("Tag="):
            tag, start, length, _max, blob = line[4:].split(",", 4)
            out.setdefault(tag, []).append((base + float(start), float(length), hdrh.HdrHistogram.decode(blob.encode("ascii"))))
    return out


def intervals(path: str | Path) -> dict[str, list[tuple[float, float, int, int]]]:
    """``{tag: [(start s, length s, count, p99 µs)]}`` of every interval line."""
    return {
        tag: [(start, length, h.get_total_count(), h.get_value_at_percentile(99)) for start, length, h in rows]
        for tag, rows in histograms(path).items()
    }
