"""A run's saved files, written and read in this one place (``mcpfast report`` and ``compare``
redraw from them; nothing is measured again): a bench's ``summary.json`` and, per family and
transport (``<prefix>`` = ``<out>/<family>-<transport>``), ``<prefix>_histograms.json`` (the µs
HDR histograms), ``_histograms.hlog`` (their interval log), ``_locust.json``, ``_churn.json``,
``_stats.csv``, ``_stats_history.csv``, ``_failures.csv`` and ``_memory.csv``; a soak's
``results.json``. Results files are written atomically (a reader never sees half of one),
indented, with paths and dataclasses as JSON; a missing or broken file reads as empty.
"""

from __future__ import annotations

import csv
import json
import math
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from mcpfast.locust import intervals as iv
from mcpfast.locust.histogram import Histogram
from mcpfast.locust.hlog import IntervalLog

__all__ = [
    "SOAK_FORMAT",
    "SUMMARY_FORMAT",
    "SUMMARY_VERSION",
    "failure_reasons",
    "histograms",
    "history",
    "interval_log",
    "is_soak",
    "load_summary",
    "prefix",
    "read_csv",
    "read_json",
    "write_json",
    "write_summary",
]

SUMMARY_FORMAT = "mcpfast-bench"
SUMMARY_VERSION = 1
SOAK_FORMAT = "mcpfast-soak"


def _json_default(obj: Any) -> Any:
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "__dataclass_fields__"):
        return asdict(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def write_json(path: Path, data: Any) -> None:
    """Write a results file atomically: indented, newline-ended."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, default=_json_default)
        fh.write("\n")
    os.replace(tmp, path)


def read_json(path: Path) -> Any:
    """A results file's data; None when it is missing or not JSON."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def read_csv(path: Path) -> list[dict[str, str]]:
    """The rows of a CSV file with a header; ``[]`` when it is missing."""
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            return list(csv.DictReader(fh))
    except (OSError, csv.Error):
        return []


def write_summary(out: Path, summary: dict[str, Any]) -> None:
    """``<out>/summary.json``."""
    write_json(out / "summary.json", summary)


def load_summary(run: Path) -> dict[str, Any]:
    """A bench run's ``summary.json``.

    Raises:
        SystemExit: it is missing, not JSON, or not a bench summary (the message says which).
    """
    path = Path(run) / "summary.json"
    if not path.is_file():
        raise SystemExit(f"mcpfast: {path} not found (is {run} a bench run directory?)")
    data = read_json(path)
    if not isinstance(data, dict) or data.get("format") != SUMMARY_FORMAT:
        raise SystemExit(f"mcpfast: {path} is not an mcpfast bench summary")
    return data


def is_soak(run: Path) -> bool:
    """Whether ``run`` holds a soak's ``results.json``."""
    data = read_json(run / "results.json")
    return isinstance(data, dict) and data.get("format") == SOAK_FORMAT


def prefix(run: Path, fam: dict[str, Any]) -> Path:
    """Where the files of one family run of ``summary["families"]`` start."""
    return Path(run) / (fam.get("prefix") or f"{fam['family']}-{fam['transport']}")


def histograms(prefix: Path, failed: bool = False) -> dict[tuple[str, str], Histogram]:
    """``{(type, name): Histogram}`` of the successful (or the ``failed``) requests, from
    ``<prefix>_histograms.json`` (empty when missing)."""
    data = read_json(Path(f"{prefix}_histograms.json"))
    data = data if isinstance(data, dict) else {}
    return iv.histograms_by_key(data.get("failed_histograms" if failed else "histograms") or [])


def interval_log(prefix: Path) -> IntervalLog | None:
    """``<prefix>_histograms.hlog`` read back; None when the run has none (an older mcpfast) or
    it does not decode."""
    try:
        with open(f"{prefix}_histograms.hlog", encoding="ascii") as fh:
            return iv.from_lines(fh)
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def failure_reasons(prefix: Path) -> list[tuple[str, str, str, int]]:
    """Locust's ``<prefix>_failures.csv``: ``(type, name, reason, occurrences)`` per reason."""
    out = []
    for row in read_csv(Path(f"{prefix}_failures.csv")):
        count = _number(row.get("Occurrences"))
        if count is not None:
            out.append((row.get("Method") or "", row.get("Name") or "", row.get("Error") or "", int(count)))
    return out


def _number(text: Any) -> float | None:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def history(prefix: Path) -> dict[str, list[tuple[float, float | None, float | None]]]:
    """Locust's ``<prefix>_stats_history.csv`` (a row a second and name, ``Aggregated`` too) as
    ``{name: [(timestamp, cumulative count, p99 ms)]}``; every name starts at the history's first
    second, with a count of 0 (a name appears in Locust's history only once it has requests).
    Read only for a run without an interval log: Locust rounds its latencies to whole ms."""
    series: dict[str, list[tuple[float, float | None, float | None]]] = {}
    for row in read_csv(Path(f"{prefix}_stats_history.csv")):
        t = _number(row.get("Timestamp"))
        if t is not None:
            series.setdefault(row.get("Name") or "?", []).append((t, _number(row.get("Total Request Count")), _number(row.get("99%"))))
    t0 = min((pts[0][0] for pts in series.values()), default=0.0)
    return {name: pts if pts[0][0] <= t0 else [(t0, 0.0, None), *pts] for name, pts in series.items()}
