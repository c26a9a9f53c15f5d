"""Shared pieces of the locustfiles in ``loadtests/`` (private: the leading underscore keeps
``locust -f loadtests/`` from loading this file as a locustfile; siblings import it as ``_common``).

Every family runs over Streamable HTTP (``--host http://127.0.0.1:PORT/mcp``) or, with
``--mcp-command "..."``, over stdio (one server process per user); steps with no stdio form
(DELETE, the GET stream) are skipped there.  Without ``--mcp-protocol-version`` the swarm speaks
2025-11-25; ``auto`` probes ``server/discover`` and falls back to ``initialize``.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import gevent
import locust  # noqa: F401 - first: Locust's import gevent-patches the stdlib
from locust import events

from mcpfast.client.base import rss_kib
from mcpfast.locust.stats import output_prefix
from mcpfast.locust.users import FAILED_START_BACKOFF, McpUser

__all__ = ["CHURN", "MERGE", "McpUser", "close_session", "open_session"]

logger = logging.getLogger("mcpfast.loadtests")


def first_call_name(user: McpUser) -> str:
    return f"tools/call:{user.tool} (first)"


def open_session(user: McpUser) -> bool:
    """A fresh connection: new HTTP session (or new stdio process), handshake, first call.

    Each phase is its own stats name: ``initialize`` (stdio: includes the process start),
    ``notifications/initialized`` (or ``server/discover`` in 2026-07-28), ``tools/call:<tool> (first)``.
    """
    mcp = user.mcp
    if user.session_is_connection:
        mcp.restart()  # a stdio "session" is a process; a 2024-11-05 HTTP+SSE one is the GET stream
    else:
        mcp.session.reset()
    if not mcp.initialize():
        gevent.sleep(FAILED_START_BACKOFF)  # a refused handshake must not become a hot loop
        return False
    pending = mcp.session.request("tools/call", {"name": user.tool, "arguments": user.tool_args})
    reply = mcp.call("tools/call", pending=pending, name=first_call_name(user))
    return reply is not None and not reply.is_error


def close_session(user: McpUser, delete: bool = True) -> bool:
    """End the session: DELETE over HTTP (when ``delete``), nothing over stdio / HTTP+SSE (the next
    ``open_session`` ends the process / closes the stream); True if DELETEd."""
    if user.session_is_connection:
        return False
    if delete:
        return user.mcp.delete()
    user.mcp.session.reset()  # abandoned: the server keeps it until its own timeout
    return False


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
    from mcpfast.locust.options import option

    for d in drivers(environment):
        if d.family != "session_churn":
            continue
        first = f"tools/call:{option(environment, 'mcp_tool')} (first)"
        CHURN.opened = d.succeeded(first)
        CHURN.deleted = d.succeeded("DELETE")
        CHURN.abandoned = max(CHURN.opened - CHURN.deleted, 0)
        CHURN.failed = d.failed("initialize") + d.failed(first)
        CHURN.sample()


CHURN_MESSAGE = "mcpfast_churn"  # worker -> master: the worker's counters at its test_stop
CHURN_REPORT_KEY = "mcpfast_churn"  # the same, piggy-backed on every report_to_master
COUNT_KEYS = ("sessions_opened", "sessions_failed", "sessions_deleted", "sessions_abandoned")


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


def _write_churn(environment: Any, data: dict[str, Any], suffix: str = "") -> None:
    prefix = output_prefix(environment)
    if prefix is None:  # no --csv / --mcp-histogram-out: log only, write nothing into the cwd
        logger.info("mcpfast session churn: %s", json.dumps(data))
        return
    path = prefix + f"_churn{suffix}.json"
    try:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
    except OSError:
        path = "(not written)"
    logger.info("mcpfast session churn: %s -> %s", json.dumps(data), path)


def _is(runner: Any, kind: str) -> bool:
    from locust.runners import MasterRunner, WorkerRunner

    return isinstance(runner, MasterRunner if kind == "master" else WorkerRunner)


@events.init.add_listener
def _churn_init(environment: Any, **_kw: Any) -> None:
    runner = environment.runner
    if runner is None or CHURN_MESSAGE in getattr(runner, "custom_messages", {}):
        return
    if _is(runner, "master"):

        def on_final(environment: Any, msg: Any, **_kw: Any) -> None:
            MERGE.update(msg.node_id, msg.data, final=True)

        runner.register_message(CHURN_MESSAGE, on_final)


@events.report_to_master.add_listener
def _churn_report(client_id: str, data: dict, **_kw: Any) -> None:
    if MERGE.environment is not None:
        refresh_native_churn(MERGE.environment)
    data[CHURN_REPORT_KEY] = CHURN.summary()


@events.worker_report.add_listener
def _churn_worker_report(client_id: str, data: dict, **_kw: Any) -> None:
    counts = data.get(CHURN_REPORT_KEY)
    if counts is not None and client_id not in MERGE.final:
        MERGE.update(client_id, counts, final=False)


@events.test_start.add_listener
def _churn_start(environment: Any, **_kw: Any) -> None:
    CHURN.reset()
    MERGE.environment = environment  # every process: the environment the counters belong to
    parsed = getattr(environment, "parsed_options", None)
    CHURN.pid = int(getattr(parsed, "mcp_server_pid", 0) or 0)
    if CHURN.pid:
        CHURN.rss_start = rss_kib(CHURN.pid)
    runner = environment.runner
    if _is(runner, "master"):
        MERGE.reset(environment)
        MERGE.expected = {c.id for c in runner.clients.all}


@events.test_stop.add_listener
def _churn_stop(environment: Any, **_kw: Any) -> None:
    from mcpfast.locust import stats as mstats

    for hook in list(mstats.get(environment).stop_hooks):
        hook()  # the native engine's final drain first (idempotent; McpStats runs it too)
    refresh_native_churn(environment)
    runner = environment.runner
    if _is(runner, "worker"):
        # --processes / --worker: the master merges every worker's counters into one file
        runner.send_message(CHURN_MESSAGE, CHURN.summary())
        return
    if _is(runner, "master"):
        MERGE.stopped = True
        MERGE.stop_time = time.time()
        MERGE.write()  # rewritten as the workers' final counters arrive
        return
    if CHURN.opened:
        _write_churn(environment, CHURN.summary())


@events.quitting.add_listener
def _churn_quitting(environment: Any, **_kw: Any) -> None:
    if _is(environment.runner, "master") and MERGE.stopped:
        MERGE.write()


def named_only(user_class: type, path: str) -> None:
    """``user_class`` runs only when its locustfile is named with ``-f`` (``-f loadtests/hold.py``),
    not with the whole directory (``-f loadtests/``): a family whose load is of another kind (held
    streams, tasks, alternating eras) is asked for by name."""
    import os

    here = os.path.realpath(path)

    @events.init.add_listener
    def _named_only(environment: Any, **_kw: Any) -> None:
        given = str(getattr(getattr(environment, "parsed_options", None), "locustfile", "") or "")
        if given in ("", "-"):
            return  # a worker with the master's files, or library use: the master decides
        named = {os.path.realpath(p.strip()) for p in given.split(",") if p.strip()}
        classes = environment.user_classes
        if here not in named and user_class in classes and len(classes) > 1:
            classes.remove(user_class)
