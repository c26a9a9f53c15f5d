"""What a load generator can read of the server it loads, beside its answers.

A local server, given its pid: its process tree's CPU seconds and resident memory from
``/proc`` (every worker a supervisor forked counts). A remote one: its Prometheus page
(``/metrics`` beside the MCP endpoint, where ``mcpfast serve --metrics`` answers):
``process_cpu_seconds_total``, ``process_resident_memory_bytes`` and ``mcpfast_sessions_open``,
each summed over the samples (one per worker in multiprocess mode). Reads are blocking and
bounded; under gevent the socket is gevent's.
"""

from __future__ import annotations

import os
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

__all__ = [
    "METRIC_CPU",
    "METRIC_RSS",
    "METRIC_SESSIONS",
    "ServerProbe",
    "ServerReading",
    "child_pids",
    "metrics_url",
    "parse_metrics",
    "process_tree",
    "read_metrics",
    "tree_cpu_seconds",
    "tree_rss_bytes",
]

METRIC_CPU = "process_cpu_seconds_total"
METRIC_RSS = "process_resident_memory_bytes"
METRIC_SESSIONS = "mcpfast_sessions_open"
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def child_pids(pid: int) -> list[int]:
    """Direct children of ``pid`` (Linux ``/proc/PID/task/*/children``)."""
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as fh:
                out.extend(int(x) for x in fh.read().split())
        except (OSError, ValueError):
            continue
    return out


def process_tree(pid: int) -> list[int]:
    """``pid`` and every process below it (workers a supervisor forked, granian's worker)."""
    found = [pid]
    for child in child_pids(pid):
        found.extend(process_tree(child))
    return found


def _stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            # the command name may hold spaces and parentheses: fields start after the last ")"
            return fh.read().rpartition(")")[2].split()
    except (OSError, ValueError):
        return None


def tree_cpu_seconds(pid: int) -> float | None:
    """User plus system CPU seconds of ``pid`` and every process below it; None once it is gone."""
    total: float | None = None
    for p in process_tree(pid):
        fields = _stat_fields(p)
        if fields is None or len(fields) < 13:
            continue
        total = (total or 0.0) + (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS
    return total


def tree_rss_bytes(pid: int) -> int | None:
    """Summed resident memory of ``pid`` and every process below it; None once it is gone."""
    total: int | None = None
    for p in process_tree(pid):
        fields = _stat_fields(p)
        if fields is None or len(fields) < 22:
            continue
        total = (total or 0) + int(fields[21]) * _PAGE
    return total


def metrics_url(url: str) -> str:
    """``/metrics`` beside the MCP endpoint ``url``."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, "/metrics", "", ""))


def parse_metrics(text: str, names: tuple[str, ...] = (METRIC_CPU, METRIC_RSS, METRIC_SESSIONS)) -> dict[str, float]:
    """The samples of ``names`` in a Prometheus text page, each summed over its label sets; a
    name the page does not have is left out."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        head, _, rest = line.partition(" ")
        name = head.partition("{")[0]
        if name not in names:
            continue
        try:
            value = float(rest.split()[0])
        except (ValueError, IndexError):
            continue
        out[name] = out.get(name, 0.0) + value
    return out


def read_metrics(url: str, timeout: float = 2.0) -> dict[str, float] | None:
    """:func:`parse_metrics` of the page at ``url``; None when it cannot be read."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            return parse_metrics(reply.read().decode("utf-8", "replace"))
    except (OSError, urllib.error.URLError, ValueError):
        return None


@dataclass(frozen=True)
class ServerReading:
    """One look at the server; a figure it could not give is None."""

    at: float  # time.monotonic() of the reading
    cpu_s: float | None
    rss_bytes: int | None
    sessions_open: int | None
    alive: bool  # False: its pid is gone (a local server that exited)


class ServerProbe:
    """Reads a server by pid (``/proc``), by its ``/metrics`` page, or both (the pid gives CPU
    and memory, the page the open sessions)."""

    def __init__(self, pid: int | None = None, metrics: str | None = None) -> None:
        self.pid = pid or None
        self.metrics = metrics
        self.has_metrics: bool | None = None  # learned at the first read of the page

    @property
    def blind(self) -> bool:
        """Nothing to read: no pid, and no page (or a page that never answered)."""
        return self.pid is None and (self.metrics is None or self.has_metrics is False)

    def read(self) -> ServerReading:
        now = time.monotonic()
        cpu: float | None = None
        rss: int | None = None
        alive = True
        if self.pid is not None:
            cpu = tree_cpu_seconds(self.pid)
            rss = tree_rss_bytes(self.pid)
            alive = cpu is not None
        sessions: int | None = None
        if self.metrics is not None and self.has_metrics is not False and alive:
            page = read_metrics(self.metrics)
            if self.has_metrics is None:
                self.has_metrics = page is not None
            if page:
                if METRIC_SESSIONS in page:
                    sessions = int(page[METRIC_SESSIONS])
                if cpu is None and METRIC_CPU in page:
                    cpu = page[METRIC_CPU]
                if rss is None and METRIC_RSS in page:
                    rss = int(page[METRIC_RSS])
        return ServerReading(now, cpu, rss, sessions, alive)
