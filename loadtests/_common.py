"""Shared pieces of the locustfiles in ``loadtests/`` (private: the leading underscore keeps
``locust -f loadtests/`` from loading this file as a locustfile; siblings import it as ``_common``).

Every family runs over Streamable HTTP (``--host http://127.0.0.1:PORT/mcp``) or, with
``--mcp-command "..."``, over stdio (one server process per user); steps with no stdio form
(DELETE, the GET stream) are skipped there.  Without ``--mcp-protocol-version`` the swarm speaks
2025-11-25; ``auto`` probes ``server/discover`` and falls back to ``initialize``.
"""

from __future__ import annotations

import locust  # noqa: F401, I001 - first: Locust's import gevent-patches the stdlib

import json
import logging
import time
from typing import Any

import gevent
from locust import events

from mcpfast.client.base import rss_kib
from mcpfast.locust.stats import output_prefix
from mcpfast.locust.users import FAILED_START_BACKOFF, McpUser

__all__ = ["CHURN", "McpUser", "open_session", "close_session"]

logger = logging.getLogger("mcpfast.loadtests")


def first_call_name(user: McpUser) -> str:
    return f"tools/call:{user.tool} (first)"


def open_session(user: McpUser) -> bool:
    """A fresh connection: new HTTP session (or new stdio process), handshake, first call.

    Each phase is its own stats name: ``initialize`` (stdio: includes the process start),
    ``notifications/initialized`` (or ``server/discover`` in 2026-07-28), ``tools/call:<tool> (first)``.
    """
    mcp = user.mcp
    if user.is_stdio:
        mcp.restart()  # a stdio "session" is a process
    else:
        mcp.session.reset()
    if not mcp.initialize():
        gevent.sleep(FAILED_START_BACKOFF)  # a refused handshake must not become a hot loop
        return False
    pending = mcp.session.request("tools/call", {"name": user.tool, "arguments": user.tool_args})
    reply = mcp.call("tools/call", pending=pending, name=first_call_name(user))
    return reply is not None and not reply.is_error


def close_session(user: McpUser, delete: bool = True) -> bool:
    """End the session: DELETE over HTTP (when ``delete``), nothing over stdio; True if DELETEd."""
    if user.is_stdio:
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


@events.test_start.add_listener
def _churn_start(environment: Any, **_kw: Any) -> None:
    CHURN.reset()
    parsed = getattr(environment, "parsed_options", None)
    CHURN.pid = int(getattr(parsed, "mcp_server_pid", 0) or 0)
    if CHURN.pid:
        CHURN.rss_start = rss_kib(CHURN.pid)


@events.test_stop.add_listener
def _churn_stop(environment: Any, **_kw: Any) -> None:
    if not CHURN.opened:
        return
    data = CHURN.summary()
    from locust.runners import WorkerRunner

    runner = environment.runner
    # --processes / --worker: one file per worker (the counters are per process, not merged)
    suffix = f"-worker{runner.worker_index}" if isinstance(runner, WorkerRunner) else ""
    path = output_prefix(environment) + f"_churn{suffix}.json"
    try:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
    except OSError:
        path = "(not written)"
    logger.info("mcpfast session churn: %s -> %s", json.dumps(data), path)
