"""Session churn counters (``loadtests/session_churn.py``): sessions opened, DELETEd, abandoned and
failed per process, the server's memory (``--mcp-server-pid``), and their merge on a master.

Each process counts into :data:`CHURN` (the Python users directly; on the native engine from the
engine's rows, :func:`refresh_native_churn`).  A worker piggy-backs its cumulative counters on
every ``report_to_master`` and sends them once more at its ``test_stop``; the master keeps the
latest per worker (:class:`ChurnMerge`) and rewrites one ``<prefix>_churn.json`` as the final ones
arrive.  A local run writes it at ``test_stop``.  :func:`register` adds the listeners (once).
"""

from __future__ import annotations

import functools
import json
import logging
import time
from typing import Any

import locust  # first: Locust's import gevent-patches the stdlib

from mcpfast.client.base import rss_kib
from mcpfast.locust import stats as mstats
from mcpfast.locust.families import first_call_name
from mcpfast.locust.options import option
from mcpfast.locust.stats import output_prefix, runner_kind

__all__ = ["CHURN", "MERGE", "ChurnCounters", "ChurnMerge", "refresh_native_churn", "register"]

logger = logging.getLogger("mcpfast.loadtests")

CHURN_MESSAGE = "mcpfast_churn"  # worker -> master: the worker's counters at its test_stop
CHURN_REPORT_KEY = "mcpfast_churn"  # the same, piggy-backed on every report_to_master
COUNT_KEYS = ("sessions_opened", "sessions_failed", "sessions_deleted", "sessions_abandoned")


class ChurnCounters:
    """Per-process session churn counters and the server's memory (``--mcp-server-pid``)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.opened = 0
        self.deleted = 0
        self.abandoned = 0
        self.failed = 0
        self.pid = 0
        self.rss_start: int | None = None
        self.rss_peak: int | None = None
        self.started = time.time()

    def sample(self) -> None:
        if self.pid:
            rss = rss_kib(self.pid)
            if rss is not None:
                self.rss_peak = rss if self.rss_peak is None else max(self.rss_peak, rss)

    def summary(self) -> dict[str, Any]:
        elapsed = max(time.time() - self.started, 1e-9)
        rss_end = rss_kib(self.pid) if self.pid else None
        open_now = self.abandoned  # sessions the server still holds (never DELETEd)
        per_session = None
        if rss_end is not None and self.rss_start is not None and open_now:
            per_session = round((rss_end - self.rss_start) / open_now, 1)
        ended = self.deleted + self.abandoned
        return {
            "sessions_opened": self.opened,
            "sessions_failed": self.failed,
            "sessions_deleted": self.deleted,
            "sessions_abandoned": self.abandoned,
            "delete_share": round(self.deleted / ended, 4) if ended else None,
            "opened_per_s": round(self.opened / elapsed, 2),
            "closed_per_s": round(self.deleted / elapsed, 2),
            "server_pid": self.pid or None,
            "server_rss_kib_start": self.rss_start,
            "server_rss_kib_peak": self.rss_peak,
            "server_rss_kib_end": rss_end,
            "server_rss_kib_per_abandoned_session": per_session,
        }


CHURN = ChurnCounters()


def refresh_native_churn(environment: Any) -> None:
    """On the native engine the session churn counters come from the engine's rows: a session is
    opened when its first call succeeded, deleted when its DELETE did; the rest are abandoned."""
    from mcpfast.locust.native import drivers

    for d in drivers(environment):
        if d.family != "session_churn":
            continue
        first = first_call_name(str(option(environment, "mcp_tool")))
        CHURN.opened = d.succeeded(first)
        CHURN.deleted = d.succeeded("DELETE")
        CHURN.abandoned = max(CHURN.opened - CHURN.deleted, 0)
        CHURN.failed = d.failed("initialize") + d.failed(first)
        CHURN.sample()


class ChurnMerge:
    """Master side of ``--processes`` / ``--master``: the workers' cumulative counters (latest per
    worker, so a periodic report followed by the final one never double counts) merged into one
    ``<prefix>_churn.json``, rewritten whenever a worker's final counters arrive."""

    def __init__(self) -> None:
        self.latest: dict[str, dict[str, Any]] = {}
        self.final: set[str] = set()
        self.expected: set[str] = set()
        self.stopped = False
        self.stop_time: float | None = None
        self.environment: Any = None

    def reset(self, environment: Any) -> None:
        self.latest.clear()
        self.final.clear()
        self.expected = set()
        self.stopped = False
        self.stop_time = None
        self.environment = environment

    def update(self, client_id: str, counts: dict[str, Any], final: bool) -> None:
        self.latest[client_id] = counts
        if final:
            self.final.add(client_id)
        if self.stopped:
            self.write()

    def merged(self) -> dict[str, Any]:
        totals = {k: sum(int(w.get(k) or 0) for w in self.latest.values()) for k in COUNT_KEYS}
        end = self.stop_time or time.time()
        elapsed = max(end - CHURN.started, 1e-9)
        rss_end = rss_kib(CHURN.pid) if CHURN.pid else None
        peaks = [w["server_rss_kib_peak"] for w in self.latest.values() if w.get("server_rss_kib_peak") is not None]
        peak = max(peaks + ([rss_end] if rss_end is not None else [])) if peaks or rss_end is not None else None
        opened, deleted, abandoned = totals["sessions_opened"], totals["sessions_deleted"], totals["sessions_abandoned"]
        ended = deleted + abandoned
        per_session = None
        if rss_end is not None and CHURN.rss_start is not None and abandoned:
            per_session = round((rss_end - CHURN.rss_start) / abandoned, 1)
        return {
            **totals,
            "delete_share": round(deleted / ended, 4) if ended else None,
            "opened_per_s": round(opened / elapsed, 2),
            "closed_per_s": round(deleted / elapsed, 2),
            "server_pid": CHURN.pid or None,
            "server_rss_kib_start": CHURN.rss_start,
            "server_rss_kib_peak": peak,
            "server_rss_kib_end": rss_end,
            "server_rss_kib_per_abandoned_session": per_session,
            "workers": len(self.latest),
            "workers_final": len(self.final),
            "complete": bool(self.latest) and self.final >= (self.expected or set(self.latest)),
            "per_worker": {str(i): {k: w.get(k) for k in COUNT_KEYS} for i, (_cid, w) in enumerate(sorted(self.latest.items()))},
        }

    def write(self) -> None:
        if self.environment is None or not any(w.get("sessions_opened") for w in self.latest.values()):
            return
        _write_churn(self.environment, self.merged())


MERGE = ChurnMerge()


def _write_churn(environment: Any, data: dict[str, Any]) -> None:
    prefix = output_prefix(environment)
    if prefix is None:  # no --csv / --mcp-histogram-out: log only, write nothing into the cwd
        logger.info("mcpfast session churn: %s", json.dumps(data))
        return
    path = prefix + "_churn.json"
    try:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
    except OSError:
        path = "(not written)"
    logger.info("mcpfast session churn: %s -> %s", json.dumps(data), path)


# -- listeners ----------------------------------------------------------------------------------------
def _on_init(environment: Any, **_kw: Any) -> None:
    runner = environment.runner
    if runner is None or CHURN_MESSAGE in getattr(runner, "custom_messages", {}):
        return
    if runner_kind(runner) == "master":

        def on_final(environment: Any, msg: Any, **_kw: Any) -> None:
            MERGE.update(msg.node_id, msg.data, final=True)

        runner.register_message(CHURN_MESSAGE, on_final)


def _on_report_to_master(client_id: str, data: dict, **_kw: Any) -> None:
    if MERGE.environment is not None:
        refresh_native_churn(MERGE.environment)
    data[CHURN_REPORT_KEY] = CHURN.summary()


def _on_worker_report(client_id: str, data: dict, **_kw: Any) -> None:
    counts = data.get(CHURN_REPORT_KEY)
    if counts is not None and client_id not in MERGE.final:
        MERGE.update(client_id, counts, final=False)


def _on_test_start(environment: Any, **_kw: Any) -> None:
    CHURN.reset()
    MERGE.environment = environment  # every process: the environment the counters belong to
    CHURN.pid = int(option(environment, "mcp_server_pid") or 0)
    if CHURN.pid:
        CHURN.rss_start = rss_kib(CHURN.pid)
    runner = environment.runner
    if runner_kind(runner) == "master":
        MERGE.reset(environment)
        MERGE.expected = {c.id for c in runner.clients.all}


def _on_test_stop(environment: Any, **_kw: Any) -> None:
    mstats.get(environment).finish_engines()  # the native engine's final drain first
    refresh_native_churn(environment)
    runner = environment.runner
    kind = runner_kind(runner)
    if kind == "worker":
        # --processes / --worker: the master merges every worker's counters into one file
        runner.send_message(CHURN_MESSAGE, CHURN.summary())
        return
    if kind == "master":
        MERGE.stopped = True
        MERGE.stop_time = time.time()
        MERGE.write()  # rewritten as the workers' final counters arrive
        return
    if CHURN.opened:
        _write_churn(environment, CHURN.summary())


def _on_quitting(environment: Any, **_kw: Any) -> None:
    if runner_kind(environment.runner) == "master" and MERGE.stopped:
        MERGE.write()


@functools.cache  # once per process
def register() -> None:
    """Add the churn listeners to Locust's global events."""
    events = locust.events
    events.init.add_listener(_on_init)
    events.report_to_master.add_listener(_on_report_to_master)
    events.worker_report.add_listener(_on_worker_report)
    events.test_start.add_listener(_on_test_start)
    events.test_stop.add_listener(_on_test_stop)
    events.quitting.add_listener(_on_quitting)
