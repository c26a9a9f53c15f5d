"""The MCP tab of Locust's web UI: the run's µs figures live, where people watch the run.

Locust's own charts and tables read its millisecond buckets, so a 63 µs median shows as ``0``.
This tab reads the swarm's 1 µs-resolution histograms (:mod:`mcpfast.locust.stats`; on a master,
the workers' merged ones) through Locust's extension points for its React UI:

* ``web_ui.template_args``: ``extended_tabs`` adds the tab ``MCP``, ``extended_tables`` its
  columns (type, name, requests, failures, p50 to p99.99, max), ``extended_csv_files`` a link to
  the full page in the *Download Data* tab;
* an ``after_request`` hook on Locust's Flask app adds the tab's rows to ``/stats/requests`` as
  ``extended_stats`` (the UI reads them from there every two seconds, as Locust's
  ``examples/extend_web_ui.py`` does);
* routes of a blueprint on ``web_ui.app`` (behind ``web_ui.auth_required_if_enabled``, under
  ``--web-base-path``): ``/mcp``, a self-contained page (inline style and script, no network)
  drawing latency by percentile, p50/p99 per interval of the ``.hlog`` interval log, the
  handshake phases, failures by reason with their own latencies, the generator gauge and, while
  ``shapes/capacity.py`` runs, the capacity search's curve step by step; ``/mcp/data``, its figures
  as JSON (:mod:`mcpfast.locust.webui_view` computes them); ``/mcp/embed.js``, which Locust's
  index page loads (one ``<script>`` the same hook adds to it) to show that page below the tab's
  table. Should a Locust release draw its page otherwise, the table and the page's link still work.

The generator gauge is the capacity search's rule (:data:`mcpfast.locust.capacity.GENERATOR_BUSY`
of the busiest thread's CPU demand, run plus run-queue wait from ``/proc/self/task/*/schedstat``):
red when a generator process, not the server, may set the pace. Each worker reads its own and
sends it with its periodic report; a local run reads its own when the page asks.

:func:`register` adds one ``init`` listener; the locustfiles' common setup calls it.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import time
from importlib import resources
from typing import Any

import locust  # first: Locust's import gevent-patches the stdlib
from flask import Blueprint, Response, jsonify, request
from locust.runners import MasterRunner, WorkerRunner

from mcpfast.locust import capacity_shape, webui_view
from mcpfast.locust import stats as mstats
from mcpfast.locust.capacity import GENERATOR_BUSY

__all__ = ["REPORT_KEY", "TAB_KEY", "DemandMeter", "LiveView", "install", "register"]

logger = logging.getLogger(__name__)

TAB_KEY = "mcp"  # the tab's key: Locust's ?tab= query, and its extended_stats entry
TAB_TITLE = "MCP"  # Locust writes tab titles in capitals, which would turn µ into a Greek capital M
REPORT_KEY = "mcpfast_webui"  # a worker's busiest-thread share, in its report to the master
CACHE_S = 0.5  # the page's figures are computed at most this often, however many pages poll
STATIC = "webui_static"


class DemandMeter:
    """The busiest thread's CPU demand (run plus run-queue wait) of this process, as a share of
    one core over the time since the previous reading; None until two readings ``min_s`` apart."""

    def __init__(self, min_s: float = 1.0) -> None:
        self.min_s = min_s
        self.share: float | None = None
        self._last: tuple[float, dict[int, int]] | None = None

    def read(self) -> float | None:
        now = time.monotonic()
        if self._last is not None and now - self._last[0] < self.min_s:
            return self.share
        demand = capacity_shape.thread_demand()
        if self._last is not None:
            seconds = now - self._last[0]
            before = self._last[1]
            busiest = max(((n - before.get(tid, 0)) / 1e9 / seconds for tid, n in demand.items()), default=0.0)
            self.share = min(busiest, 1.0)
        self._last = (now, demand)
        return self.share


class LiveView:
    """One web UI's figures: what the tab and the page show of the environment's swarm."""

    def __init__(self, environment: Any) -> None:
        self.environment = environment
        self.stats = mstats.get(environment)
        self.timeline = webui_view.Timeline()
        self.meter = DemandMeter()
        self.worker_shares: dict[str, float | None] = {}
        self._cached: tuple[float, dict[str, Any]] | None = None

    def on_worker_report(self, client_id: str, data: dict[str, Any], **_kw: Any) -> None:
        mine = data.get(REPORT_KEY)
        if isinstance(mine, dict):
            share = mine.get("generator_cpu")
            self.worker_shares[client_id] = float(share) if share is not None else None

    def _rows(self) -> tuple[list[webui_view.NameRow], webui_view.NameRow | None]:
        return webui_view.name_rows(self.stats.ok, self.stats.failed, mstats.TABLE_PERCENTILES)

    def tab_rows(self) -> list[dict[str, str]]:
        rows, total = self._rows()
        return webui_view.tab_rows(rows, total, mstats.TABLE_PERCENTILES)

    def shares(self) -> dict[str, float | None]:
        runner = self.environment.runner
        if isinstance(runner, MasterRunner):
            connected = {c.id for c in runner.clients.values()}
            return {k: v for k, v in self.worker_shares.items() if k in connected}
        return {"local": self.meter.read()}

    def data(self) -> dict[str, Any]:
        now = time.monotonic()
        if self._cached is not None and now - self._cached[0] < CACHE_S:
            return self._cached[1]
        out = self._compute()
        self._cached = (now, out)
        return out

    def _compute(self) -> dict[str, Any]:
        stats = self.stats
        runner = self.environment.runner
        percentiles = mstats.TABLE_PERCENTILES
        rows, total = self._rows()
        self.timeline.update(stats.intervals)
        keys = [(r.request_type, r.name) for r in rows]
        started = stats.start_time
        stop = stats.stop_time or time.time()
        return {
            "format": "mcpfast-webui",
            "state": getattr(runner, "state", None),
            "runner": mstats.runner_kind(runner),
            "users": int(getattr(runner, "user_count", 0) or 0),
            "host": getattr(self.environment, "host", None),
            "elapsed_s": round(stop - started, 1) if started else None,
            "requests": total.requests if total else 0,
            "failures": total.failures if total else 0,
            "empty": None if total else "No requests yet: the figures appear with the first completed request.",
            "columns": webui_view.tab_columns(percentiles),
            "rows": [r.to_dict(percentiles) for r in ([*rows, total] if total else [])],
            "percentiles": webui_view.percentile_chart([(_label(r, rows), r.ok) for r in rows]),
            "timeline": self.timeline.chart(keys, started),
            "phases": webui_view.phases(rows),
            "failed": webui_view.failures(stats.failed, stats.failure_reasons()),
            "generator": webui_view.generator_view(self.shares(), GENERATOR_BUSY),
            "capacity": webui_view.capacity_view(capacity_shape.progress(self.environment)),
        }


def _label(row: webui_view.NameRow, rows: list[webui_view.NameRow]) -> str:
    """A chart's name for a row: its name, with its type when another type has the same name."""
    twins = sum(1 for r in rows if r.name == row.name)
    return row.name if twins == 1 else f"{row.request_type} {row.name}"


def _asset(name: str) -> str:
    return resources.files("mcpfast.locust").joinpath(STATIC, name).read_text(encoding="utf-8")


def install(environment: Any, web_ui: Any) -> LiveView:
    """Add the tab, its rows, the page and its data routes to ``web_ui`` (a Locust ``WebUI``)."""
    view = LiveView(environment)
    if isinstance(environment.runner, MasterRunner):
        environment.events.worker_report.add_listener(view.on_worker_report)
    page, embed = _asset("mcp.html"), _asset("embed.js")
    base = getattr(getattr(environment, "parsed_options", None), "web_base_path", None) or None
    blueprint = Blueprint("mcpfast", __name__, url_prefix=base)

    @blueprint.route("/mcp")
    @web_ui.auth_required_if_enabled
    def mcp_page() -> Response:
        return Response(page, mimetype="text/html")

    @blueprint.route("/mcp/data")
    @web_ui.auth_required_if_enabled
    def mcp_data() -> Response:
        return jsonify(view.data())

    @blueprint.route("/mcp/embed.js")
    @web_ui.auth_required_if_enabled
    def mcp_embed() -> Response:
        return Response(embed, mimetype="application/javascript")

    web_ui.app.register_blueprint(blueprint)

    @web_ui.app.after_request
    def extend(response: Response) -> Response:
        if response.status_code != 200:
            return response
        if request.endpoint == "locust.request_stats" and response.is_json:
            data = response.get_json()
            data["extended_stats"] = [{"key": TAB_KEY, "data": view.tab_rows()}]
            response.set_data(json.dumps(data))
        elif request.endpoint == "locust.index" and response.mimetype == "text/html":
            html = response.get_data(as_text=True)
            response.set_data(html.replace("</body>", '<script src="./mcp/embed.js"></script></body>', 1))
        return response

    web_ui.template_args["extended_tabs"] = [{"title": TAB_TITLE, "key": TAB_KEY}]
    web_ui.template_args["extended_tables"] = [{"key": TAB_KEY, "structure": webui_view.tab_columns(mstats.TABLE_PERCENTILES)}]
    web_ui.template_args["extended_csv_files"] = [{"href": "./mcp", "title": "MCP latency page (µs histograms, charts)"}]
    return view


def _report_share(meter: DemandMeter) -> Any:
    def on_report(client_id: str, data: dict[str, Any], **_kw: Any) -> None:
        data[REPORT_KEY] = {"generator_cpu": meter.read(), "pid": os.getpid()}

    return on_report


def _on_init(environment: Any, web_ui: Any = None, **_kw: Any) -> None:
    if isinstance(environment.runner, WorkerRunner):
        # the master shows the gauge: each worker's busiest thread rides on its report (3 s)
        environment.events.report_to_master.add_listener(_report_share(DemandMeter(min_s=0.5)))
    elif web_ui is not None:
        install(environment, web_ui)


@functools.cache  # once per process
def register() -> None:
    """The tab for every web UI Locust builds (one ``init`` listener; adds nothing to a headless
    run's master, and a worker's report gains one number)."""
    locust.events.init.add_listener(_on_init)
