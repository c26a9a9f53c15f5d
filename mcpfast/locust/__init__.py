"""Measurement pieces of the mcpfast Locust swarm.

* :mod:`mcpfast.locust.histogram` - HDR-style µs latency histograms (pure Python).
* :mod:`mcpfast.locust.pacing` - open-model arrival schedule (sans-IO core + gevent adapter).
* :mod:`mcpfast.locust.options` - the swarm's Locust command-line options.
* :mod:`mcpfast.locust.hlog` - HdrHistogram interval logs (``.hlog``, V2 compressed; pure Python).
* :mod:`mcpfast.locust.scenario` - workload files and discovered mixes (pure Python; a plain client).
* :mod:`mcpfast.locust.thresholds` - ``--mcp-threshold`` CI gates on the histograms (pure Python).
* :mod:`mcpfast.locust.stats` - wiring into Locust events (imports ``locust``).
* :mod:`mcpfast.locust.locust_shim` - what the swarm needs of Locust beyond its extension points
  (the ``--csv`` files' final rows), for the Locust versions it supports; refuses any other.
* :mod:`mcpfast.locust.users` - the MCP users; :mod:`mcpfast.locust.families` - what the families share.
* :mod:`mcpfast.locust.hold`, :mod:`mcpfast.locust.tasks`, :mod:`mcpfast.locust.churn`,
  :mod:`mcpfast.locust.scenario_run` - a family's logic (counters, checks, worker messages, outputs);
  its locustfile in ``mcpfast/loadtests/`` holds only the user class and its task.
* :mod:`mcpfast.locust.native` - Locust drives the compiled core's native load engine (imports ``locust``).
* :mod:`mcpfast.locust.prometheus` - ``--mcp-prometheus-port``: the run's figures for Prometheus to scrape.
* :mod:`mcpfast.locust.otel` - Locust's ``--otel``: the native engine's requests in the OpenTelemetry metrics too.

This package ``__init__`` imports nothing, so importing the pure modules does not pull in
Locust (whose import monkey-patches the standard library).
"""
