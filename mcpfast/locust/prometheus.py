"""``--mcp-prometheus-port``: the swarm's figures in the Prometheus text format, for a Prometheus to scrape.

The master (or the only process of a run without workers) serves them on ``[HOST:]PORT`` (every
path; ``/metrics`` by convention).  A worker ignores the option with one notice: only the master
holds the merged figures (the workers forked by ``--processes N`` say nothing, the option was the
master's).  Every sample carries ``testid``: ``--mcp-testid``, else an id made when the process
starts and logged with the address.

* ``mcpfast_swarm_requests_total{type,name,testid}``, ``mcpfast_swarm_failures_total{...}``:
  Locust's own rows - ``Type``, ``Name``, ``Request Count`` and ``Failure Count`` of
  ``_stats.csv`` - read from the master's ``RequestStats``, which merges the workers' reports;
* ``mcpfast_swarm_request_duration_microseconds{type,name,testid}`` (``_bucket{le}``, ``_sum``,
  ``_count``): successes and failures together, from the µs histograms of
  :mod:`mcpfast.locust.stats` (merged on the master from the same reports), cut at
  :data:`BUCKETS_US`;
* ``mcpfast_swarm_users{testid}``: users running (on a master, the workers' sum).

Nothing here runs per request: a collector reads the live tables when Prometheus scrapes.  The
server is a gevent WSGI server on Locust's hub, so a scrape runs between two greenlets and reads
one consistent state; the native engine's windows enter both tables in bulk once a second.

When the test is over, the process keeps serving the final figures for ``--mcp-prometheus-linger``
seconds (default 15, Prometheus' default scrape interval), so that a scrape sees the final counts:
from Locust's ``quitting`` event, which comes before ``--json``/``--json-file`` serialise (and so
empty) Locust's tables.  A second Ctrl-C, or SIGTERM, ends the wait.

This module imports neither Locust nor gevent nor prometheus-client at import time: the pure parts
(bucket bounds, counting) are usable and testable without them.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Iterator
from typing import Any, Final

from mcpfast.locust.argtypes import listen_address
from mcpfast.locust.histogram import HIGHEST, Histogram, index_of
from mcpfast.locust.options import option

__all__ = ["BUCKETS_US", "Exporter", "SwarmCollector", "add_to_buckets", "cumulative", "new_testid", "serve"]

logger = logging.getLogger(__name__)

#: Upper bounds (``le``) of the latency buckets in µs: 1, 1.5, 2, 3, 5 and 7 per decade (each bound
#: 1.33 to 1.67 times the one before, so roughly logarithmic) from 50 µs to 50 s, then 60 s, the top
#: of the histograms (a longer request is counted at 60 s). Round numbers, so that a dashboard's
#: thresholds (200 µs, 1 ms, 5 ms) are bucket bounds; 38 bounds plus ``+Inf``.
BUCKETS_US: Final[tuple[int, ...]] = (
    *(
        bound
        for decade in (10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000)
        for step in (10, 15, 20, 30, 50, 70)
        if 50 <= (bound := decade * step // 10) < HIGHEST
    ),
    HIGHEST,
)
# the histogram slot holding each bound: a slot counts under ``le=B`` when it holds B or lies below
_LIMITS: Final[tuple[int, ...]] = tuple(index_of(bound) for bound in BUCKETS_US)


def add_to_buckets(h: Histogram, counts: list[int]) -> float:
    """Add ``h``'s samples to ``counts`` (one per bound of :data:`BUCKETS_US`, then one above the
    last; not cumulative) and return their sum in µs.

    Exact up to 2,047 µs, where slots are 1 µs wide; above, a slot that straddles a bound counts
    under it, so a sample at most 0.1 % above a bound may be counted at that bound.  The sum is
    the histogram's own (its mean from slot midpoints, times its count).
    """
    bucket = 0
    last = len(_LIMITS)
    for index, count in h.nonzero():
        while bucket < last and index > _LIMITS[bucket]:
            bucket += 1
        counts[bucket] += count
    return h.mean * h.total_count


def cumulative(counts: list[int]) -> list[tuple[str, int]]:
    """Prometheus buckets from :func:`add_to_buckets`' counts: ``(le, samples at or below)``, ``+Inf`` last."""
    out: list[tuple[str, int]] = []
    running = 0
    for bound, count in zip(BUCKETS_US, counts, strict=False):
        running += count
        out.append((str(bound), running))
    out.append(("+Inf", sum(counts)))
    return out


def new_testid() -> str:
    """A run id for the ``testid`` label: UTC start time plus 6 random hex digits."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(3)


class SwarmCollector:
    """prometheus-client custom collector over one Locust environment's live tables.

    ``histograms`` is the environment's :class:`mcpfast.locust.stats.McpStats` (its ``ok`` and
    ``failed`` histogram sets); passed in, so this module does not import Locust.
    """

    def __init__(self, environment: Any, histograms: Any, testid: str) -> None:
        self.environment = environment
        self.histograms = histograms
        self.testid = testid

    def describe(self) -> list[Any]:
        return []  # registration must not read tables a runner has not built yet

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        labels = ("type", "name", "testid")
        requests = CounterMetricFamily(
            "mcpfast_swarm_requests", "Requests per Locust row (Type, Name), as _stats.csv counts them", labels=labels
        )
        failures = CounterMetricFamily(
            "mcpfast_swarm_failures", "Failed requests per Locust row (Type, Name), as _stats.csv counts them", labels=labels
        )
        for entry in sorted(self.environment.stats.entries.values(), key=lambda e: (e.method, e.name)):
            row = (str(entry.method), str(entry.name), self.testid)
            requests.add_metric(row, entry.num_requests)
            failures.add_metric(row, entry.num_failures)
        duration = HistogramMetricFamily(
            "mcpfast_swarm_request_duration_microseconds",
            "Request latency in µs (successes and failures), from the swarm's 1 µs-resolution histograms",
            labels=labels,
        )
        ok, failed = self.histograms.ok, self.histograms.failed
        for request_type, name in sorted({key for key, _ in ok.items()} | {key for key, _ in failed.items()}):
            counts = [0] * (len(BUCKETS_US) + 1)
            total_us = 0.0
            for hset in (ok, failed):
                if (request_type, name) in hset:
                    total_us += add_to_buckets(hset.get(request_type, name), counts)
            duration.add_metric((request_type, name, self.testid), cumulative(counts), total_us)
        users = GaugeMetricFamily("mcpfast_swarm_users", "Users running (a master: its workers' sum)", labels=("testid",))
        runner = self.environment.runner
        users.add_metric((self.testid,), float(getattr(runner, "user_count", 0) or 0))
        yield from (requests, failures, duration, users)


class Exporter:
    """The HTTP endpoint of one Locust process: started at ``init``, stopped after the linger."""

    def __init__(self, collector: SwarmCollector, host: str, port: int, linger_s: float) -> None:
        self.collector = collector
        self.host = host
        self.port = port
        self.linger_s = linger_s
        self.server: Any = None
        self._lingering = False

    @property
    def url(self) -> str:
        host = self.host or "0.0.0.0"
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}/metrics"

    def start(self) -> None:
        """Listen and serve; ``OSError`` when the address cannot be bound (nothing is left open then)."""
        from gevent.pywsgi import WSGIServer
        from prometheus_client import CollectorRegistry, make_wsgi_app

        registry = CollectorRegistry(auto_describe=False)
        registry.register(self.collector)
        server = WSGIServer((self.host, self.port), make_wsgi_app(registry), log=None)
        server.init_socket()  # binds now, so a taken port is known before any load
        server.start()
        self.server = server

    def ran_test(self) -> bool:
        """A test started in this process (else there are no final figures to wait for)."""
        return getattr(self.collector.histograms, "start_time", None) is not None

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop(timeout=1)
            self.server = None

    def on_quitting(self, **_kw: Any) -> None:
        """Serve the final figures ``linger_s`` more seconds (if a test ran), then stop."""
        if self.server is None:
            return
        if self._lingering:  # a second shutdown (SIGTERM) during the wait: stop serving now
            self.stop()
            return
        if self.linger_s > 0 and self.ran_test():
            import gevent

            self._lingering = True
            logger.info("mcpfast: serving the final figures at %s for %g s more (--mcp-prometheus-linger)", self.url, self.linger_s)
            try:
                gevent.sleep(self.linger_s)
            except KeyboardInterrupt:
                logger.info("mcpfast: stopped serving the final figures early (Ctrl-C)")
        self.stop()


def serve(environment: Any, histograms: Any, runner_kind: str) -> Exporter | None:
    """``--mcp-prometheus-port`` for a Locust process at ``init``: the master or a local runner
    serves (returns the :class:`Exporter`); a worker only says it ignores the option.

    Raises:
        SystemExit: code 2, with the reason logged, when the address cannot be bound or
            prometheus-client is missing - before any load starts.
    """
    address = option(environment, "mcp_prometheus_port")
    if address is None:
        return None
    if runner_kind == "worker":
        parsed = getattr(environment, "parsed_options", None)
        forked = bool(getattr(parsed, "processes", None))  # --processes: the option is the master's
        (logger.debug if forked else logger.warning)(
            "mcpfast: --mcp-prometheus-port is ignored on a worker: the master serves the merged figures"
        )
        return None
    host, port = address if isinstance(address, (tuple, list)) else listen_address(str(address))
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        logger.error("mcpfast: --mcp-prometheus-port needs prometheus-client: pip install 'mcpfast[swarm]'")
        raise SystemExit(2) from None
    testid = str(option(environment, "mcp_testid") or "") or new_testid()
    exporter = Exporter(SwarmCollector(environment, histograms, testid), host, port, float(option(environment, "mcp_prometheus_linger")))
    try:
        exporter.start()
    except OSError as exc:
        logger.error("mcpfast: --mcp-prometheus-port: cannot listen on %s:%d (%s)", host or "0.0.0.0", port, exc.strerror or exc)
        raise SystemExit(2) from None
    environment.events.quitting.add_listener(exporter.on_quitting)
    logger.info("mcpfast: Prometheus metrics at %s, testid=%s", exporter.url, testid)
    return exporter
