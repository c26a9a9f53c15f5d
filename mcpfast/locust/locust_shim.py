"""What the swarm needs of Locust beyond its extension points, in one place, for the Locust
versions it is written for (:data:`SUPPORTED`).

Importing this module checks the installed Locust against :data:`SUPPORTED` and raises
:class:`UnsupportedLocust`, naming both, for any other; it changes nothing in Locust.
:func:`install` is called for each environment the swarm initialises (the ``init`` listener of
:mod:`mcpfast.locust.stats`) and works through Locust's events and public API, but for the one
patch marked PATCH below.

The one thing done there: the final rows of Locust's ``--csv`` files.  Locust's CSV writer
rewrites ``_stats.csv``, ``_failures.csv`` and ``_exceptions.csv`` and appends a
``_stats_history.csv`` row once a second, and closes the files at shutdown without a last write:
they miss the end of the run (its last second, the users' ``on_stop`` requests and, on a master,
the workers' final reports), which the console table, the HTML report, ``--json-file`` and the µs
histograms all count.  So:

* The rows are Locust's own: :class:`locust.stats.StatsCSV`'s public ``requests_csv``,
  ``failures_csv`` and ``exceptions_csv`` over ``environment.stats``; the history row is built
  from public ``StatsEntry`` figures in the columns of Locust's history file.
* They are written once Locust has closed its files, at interpreter exit (an ``atexit`` hook
  registered at Locust's ``quit`` event, its last event, fired just before it closes them).
  Locust has no hook after that close and keeps no public reference to its writer in a headless
  run; while its files are open, its writer greenlet rewrites three of them every second and its
  handle on the history file holds buffered rows that its close writes over anything appended
  through another handle.
* ``--json``/``--json-file`` empty every per-name stats entry as they serialise
  (``StatsEntry.get_stripped_report``) before ``quit``, with no event in between; then the
  per-name rows are taken from the last moment the stats are final before that: every
  ``test_stop`` (after the native engine's final drain), and on a master every worker report
  (the workers' final reports arrive after its ``test_stop``) and ``reset_stats``.
* PATCH, the only one: Locust's writer greenlet outlives the files Locust closes; when the
  process yields while exiting (``--otel``'s providers flush at exit, a greenlet killed at exit),
  its next tick fails on a closed file and gevent prints the traceback.  Locust has no hook to
  stop that greenlet and no reference to it, so :func:`install` wraps
  ``StatsCSVFileWriter.stats_writer`` (before Locust spawns it, which is after ``init``) to end
  quietly on that one failure: a ``ValueError`` once its files are closed.
"""

from __future__ import annotations

import atexit
import csv
import functools
import logging
import os
import re
import time
from collections.abc import Callable, Iterable
from itertools import chain
from typing import Any

import locust  # first: Locust's import gevent-patches the stdlib

__all__ = ["SUPPORTED", "FinalCsvRows", "UnsupportedLocust", "check_version", "install"]

logger = logging.getLogger(__name__)

# The Locust releases this module is written and tested against: the events it listens to, the
# CSV columns, the order of Locust's shutdown (pyproject.toml's swarm extra pins the same range).
SUPPORTED = ">=2.42,<3"
_LOWEST = (2, 42)
_NEXT_MAJOR = 3


class UnsupportedLocust(RuntimeError):
    """The installed Locust is outside :data:`SUPPORTED`."""


def check_version(version: str) -> None:
    """Raise :class:`UnsupportedLocust` unless ``version`` is within :data:`SUPPORTED`."""
    m = re.match(r"(\d+)\.(\d+)", version)
    if m is not None:
        major, minor = int(m.group(1)), int(m.group(2))
        if (major, minor) >= _LOWEST and major < _NEXT_MAJOR:
            return
    raise UnsupportedLocust(
        f"mcpfast's swarm is written for Locust {SUPPORTED}; the installed Locust is {version}. "
        f"Install a supported one: pip install 'locust{SUPPORTED}'"
    )


check_version(locust.__version__)

# after the check: a Locust outside the range is refused by name, not by a missing import
from locust.stats import (  # noqa: E402
    PERCENTILES_TO_REPORT,
    StatsCSV,
    StatsCSVFileWriter,
    StatsEntry,
    get_readable_percentiles,
    sort_stats,
)

HISTORY_COLUMNS = [  # Locust's _stats_history.csv header
    "Timestamp",
    "User Count",
    "Type",
    "Name",
    "Requests/s",
    "Failures/s",
    *get_readable_percentiles(PERCENTILES_TO_REPORT),
    "Total Request Count",
    "Total Failure Count",
    "Total Median Response Time",
    "Total Average Response Time",
    "Total Min Response Time",
    "Total Max Response Time",
    "Total Average Content Size",
]


class _Rows:
    """A ``csv.writer`` stand-in that keeps the rows."""

    def __init__(self) -> None:
        self.rows: list[list[Any]] = []

    def writerow(self, row: Iterable[Any]) -> None:
        self.rows.append(list(row))


def _percentiles(entry: StatsEntry, use_current: bool) -> list[Any]:
    if not entry.num_requests:
        return ["N/A"] * len(PERCENTILES_TO_REPORT)
    if use_current and entry.use_response_times_cache:
        return [int(entry.get_current_response_time_percentile(p) or 0) for p in PERCENTILES_TO_REPORT]
    return [int(entry.get_response_time_percentile(p) or 0) for p in PERCENTILES_TO_REPORT]


def history_rows(environment: Any, now: float, full_history: bool) -> list[list[Any]]:
    """The ``_stats_history.csv`` rows Locust's writer appends at ``now``: the aggregate, after
    every name's with ``--csv-full-history``."""
    stats = environment.stats
    runner = environment.runner
    entries = sort_stats(stats.entries) if full_history else []
    rows = []
    for entry in chain(entries, [stats.total]):
        rows.append(
            [
                int(now),
                runner.user_count if runner is not None else 0,
                entry.method or "",
                entry.name,
                f"{entry.current_rps:2f}",
                f"{entry.current_fail_per_sec:2f}",
                *_percentiles(entry, use_current=full_history),
                entry.num_requests,
                entry.num_failures,
                entry.median_response_time,
                entry.avg_response_time,
                entry.min_response_time or 0,
                entry.max_response_time,
                entry.avg_content_length,
            ]
        )
    return rows


class FinalCsvRows:
    """The final rows of one environment's ``--csv`` files (see the module docstring)."""

    def __init__(self, environment: Any, prefix: str, full_history: bool, stripped_by_json: bool) -> None:
        self.environment = environment
        self.prefix = prefix
        self.full_history = full_history
        self.stripped_by_json = stripped_by_json  # --json/--json-file empty the entries before quit
        self.csv = StatsCSV(environment, PERCENTILES_TO_REPORT)
        self.requests: list[list[Any]] | None = None  # per-name rows taken while the stats were final
        self.history: list[list[Any]] | None = None
        self.written = False

    # -- while the stats are final --------------------------------------------------------------
    def take(self, **_kw: Any) -> None:
        """Keep the requests and history rows of the stats as they are now."""
        rows = _Rows()
        self.csv.requests_csv(rows)
        self.requests = rows.rows
        self.history = history_rows(self.environment, time.time(), self.full_history)

    def take_if_stopped(self, **_kw: Any) -> None:
        """A master's worker report: the workers' final reports come after its ``test_stop``."""
        from locust.runners import STATE_RUNNING, STATE_SPAWNING

        runner = self.environment.runner
        if runner is not None and runner.state not in (STATE_RUNNING, STATE_SPAWNING):
            self.take()

    # -- at exit -----------------------------------------------------------------------------------
    def rows(self, now: float) -> tuple[list[list[Any]], list[list[Any]]]:
        """(requests rows with their header, history rows) to write at ``now``."""
        if self.stripped_by_json and self.requests is not None and self.history is not None:
            total = self.environment.stats.total.num_requests  # not emptied by the JSON
            kept = self.requests[-1][2]  # the Aggregated row's Request Count
            if kept != total:
                logger.warning(
                    "mcpfast: the CSV's final rows count %s requests, Locust's total %s: requests were counted after the last test_stop",
                    kept,
                    total,
                )
            return self.requests, [[int(now), *row[1:]] for row in self.history]
        rows = _Rows()
        self.csv.requests_csv(rows)
        return rows.rows, history_rows(self.environment, now, self.full_history)

    def write(self) -> None:
        """Write the final rows (once; Locust's own handles are closed by now)."""
        if self.written:
            return
        self.written = True
        now = time.time()
        requests, history = self.rows(now)
        files: list[tuple[str, list[list[Any]]]] = [(f"{self.prefix}_stats.csv", requests)]
        for suffix, render in (("_failures.csv", self.csv.failures_csv), ("_exceptions.csv", self.csv.exceptions_csv)):
            rows = _Rows()
            render(rows)
            files.append((self.prefix + suffix, rows.rows))
        # opened as Locust opens them (text mode, csv's \r\n line ends), so the bytes are its own
        for path, content in files:
            with open(path, "w") as fh:
                csv.writer(fh).writerows(content)
        path = f"{self.prefix}_stats_history.csv"
        empty = not os.path.exists(path) or os.path.getsize(path) == 0  # Locust's writer never ran
        with open(path, "a") as fh:
            writer = csv.writer(fh)
            if empty:
                writer.writerow(HISTORY_COLUMNS)
            writer.writerows(history)

    def write_at_exit(self, **_kw: Any) -> None:
        """``quit``: Locust closes its files next, then exits; write after that."""
        atexit.register(self._write_logged)

    def _write_logged(self) -> None:
        try:
            self.write()
        except Exception:  # at exit: say it, never turn a finished run into a crash
            logger.exception("mcpfast: could not write the final CSV rows")


def _end_quietly_once_closed(stats_writer: Callable[[Any], None]) -> Callable[[Any], None]:
    """PATCH (see the module docstring): Locust's writer loop, ending quietly when it fails
    because Locust closed its files under it; any other failure is raised as before."""

    @functools.wraps(stats_writer)
    def loop(self: Any) -> None:
        try:
            stats_writer(self)
        except ValueError:
            if not self.requests_csv_filehandle.closed:
                raise

    loop.mcpfast_quiet_once_closed = True  # type: ignore[attr-defined]
    return loop


def quiet_writer_loop() -> None:
    """PATCH (see the module docstring); once per process, whatever the calls."""
    # PATCH: Locust has no hook to stop its CSV writer greenlet, keeps no reference to it in a
    # headless run and closes its files under it; from init on (it is spawned after init) the
    # loop ends quietly on that closed-file failure instead of gevent printing its traceback
    current = StatsCSVFileWriter.stats_writer
    if not getattr(current, "mcpfast_quiet_once_closed", False):
        StatsCSVFileWriter.stats_writer = _end_quietly_once_closed(current)  # type: ignore[method-assign, assignment]


def install(environment: Any) -> FinalCsvRows | None:
    """Give this environment's ``--csv`` files their final rows (None without ``--csv``).

    Call it from ``init`` after the listeners whose ``test_stop`` feeds the stats (the native
    engine's final drain): listeners run in the order they were added.
    """
    parsed = getattr(environment, "parsed_options", None)
    prefix = getattr(parsed, "csv_prefix", None)
    if not prefix:
        return None
    final = FinalCsvRows(
        environment,
        str(prefix),
        full_history=bool(getattr(parsed, "stats_history_enabled", False)),
        stripped_by_json=bool(getattr(parsed, "json", False) or getattr(parsed, "json_file", None)),
    )
    events = environment.events
    if final.stripped_by_json:
        events.test_stop.add_listener(final.take)
        events.worker_report.add_listener(final.take_if_stopped)
        events.reset_stats.add_listener(final.take)
    events.quit.add_listener(final.write_at_exit)
    quiet_writer_loop()
    return final
