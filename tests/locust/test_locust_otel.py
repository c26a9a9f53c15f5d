"""Locust's ``--otel`` with the swarm: every request, the native engine's included, reaches a real
OpenTelemetry Collector (``make otelcol-install``: the collector's own OTLP receiver and file
exporter, built from its Go modules; one per test on free ports) with the names and counts of
``_stats.csv``; an endpoint that is down is said once and costs the run nothing.

The pure parts (failure names, MCP attributes, the tables and their OTLP data points) are tested in
this process; the runs are ``locust`` child processes (Locust's import patches the interpreter).
"""

from __future__ import annotations

import csv
import itertools
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from _support import FAKE, REPO_ROOT, child_env, free_port, refused_port, start_http_server, start_process, start_reference_server, stop

from mcpfast._core import DrainRow
from mcpfast.locust.histogram import Histogram
from mcpfast.locust.otel import (
    BOUNDS_S,
    LOCUST_DURATION,
    MCP_DURATION,
    MIXED,
    Failure,
    OtelExport,
    Tables,
    failure_of_exception,
    failure_of_reason,
    mcp_attributes,
)
from mcpfast.locust.prometheus import BUCKETS_US, add_to_buckets

OTELCOL = REPO_ROOT / ".cache" / "otelcol" / "otelcol-mcpfast"
LOADTESTS = REPO_ROOT / "loadtests"
TOOL_ATTRS = {"mcp.method.name": "tools/call", "gen_ai.tool.name": "echo", "gen_ai.operation.name": "execute_tool"}


# -- the pure parts ------------------------------------------------------------------------------------------
def test_native_failure_reasons_are_named_as_the_python_users_exceptions() -> None:
    assert failure_of_reason("timeout") == Failure("RequestTimeout", "timeout")
    assert failure_of_reason("http 503") == Failure("HttpStatusError", "503")
    assert failure_of_reason("http 401 invalid_token") == Failure("HttpStatusError", "401")
    assert failure_of_reason("jsonrpc error -32602") == Failure("McpError", "-32602", "-32602")
    assert failure_of_reason("jsonrpc error (no code)") == Failure("McpError", "_OTHER")
    assert failure_of_reason("result has isError: true") == Failure("ToolError", "tool_error")
    assert failure_of_reason("connect failed (ConnectionRefused)") == Failure("ConnectionFailure", "connection")
    assert failure_of_reason("malformed JSON").locust == "InvalidJson"
    assert failure_of_reason("SSE stream ended without the reply").locust == "BadSse"
    assert failure_of_reason("reply id mismatch").locust == "WrongId"
    assert failure_of_reason("invalid Mcp-Session-Id").locust == "UnexpectedReply"


def test_python_exceptions_get_the_conventions_error_type() -> None:
    from mcpfast.client.errors import HttpStatusError, McpError, RequestTimeout, ToolError

    assert failure_of_exception(McpError(-32601, "no such method")) == Failure("McpError", "-32601", "-32601")
    assert failure_of_exception(HttpStatusError(429)) == Failure("HttpStatusError", "429")
    assert failure_of_exception(ToolError("echo")) == Failure("ToolError", "tool_error")
    assert failure_of_exception(RequestTimeout("tools/call")) == Failure("RequestTimeout", "timeout")
    assert failure_of_exception(KeyError("x")) == Failure("KeyError", "KeyError")


def test_mcp_attributes_of_locust_rows() -> None:
    assert dict(mcp_attributes("mcp-http", "tools/call:echo") or ()) == {
        **TOOL_ATTRS,
        "network.transport": "tcp",
        "network.protocol.name": "http",
    }
    assert dict(mcp_attributes("mcp-stdio", "tools/call:echo (first)") or ()) == {**TOOL_ATTRS, "network.transport": "pipe"}
    assert dict(mcp_attributes("mcp-stdio", "prompts/get:greet") or ())["gen_ai.prompt.name"] == "greet"
    assert dict(mcp_attributes("mcp-stdio", "initialize") or ()) == {"mcp.method.name": "initialize", "network.transport": "pipe"}
    for name in ("DELETE", "connect", "sse:gap", "GET:open", "cycle", "Retry-After wait", "oauth token"):
        assert mcp_attributes("mcp-http", name) is None, name
    assert mcp_attributes("xmlrpc", "tools/call:echo") is None


def _row(
    name: str,
    buckets: dict[int, int],
    failed: dict[int, int] | None = None,
    errors: list[tuple[str, int]] | None = None,
    by_reason: list[tuple[str, list[tuple[int, int]]]] | None = None,
) -> DrainRow:
    failed = failed or {}
    n, nf = sum(buckets.values()), sum(failed.values())
    ms = [us / 1000 for us in buckets]
    return DrainRow(
        "mcp-http",
        name,
        n,
        nf,
        sum(us / 1000 * c for us, c in buckets.items()),
        min(ms),
        max(ms),
        0,
        sorted(buckets.items()),
        [(1, n, nf)],
        1.0,
        errors or [],
        sorted(failed.items()),
        failed_by_reason=by_reason,
    )


def _points(tables: Tables, metric: str, delta: bool = False) -> dict[frozenset, tuple[int, list[int]]]:
    return {frozenset(p.attributes): (p.count, p.counts) for p in tables.points(metric, delta)}


def test_drained_rows_become_the_prometheus_exporters_buckets() -> None:
    tables = Tables()
    buckets = {1: 2, 50: 1, 51: 3, 2_001: 4, 90_000: 5, 61_000_000: 1}
    tables.add_rows([_row("tools/call:echo", buckets, {90_000: 2, 61_000_000: 1}, [("timeout", 3)])])
    tables.add_rows([_row("tools/call:echo", {51: 1})])  # the next window adds up
    points = _points(tables, LOCUST_DURATION)
    ok = Histogram()
    for us, n in {**buckets, 51: 4, 90_000: 3, 61_000_000: 0}.items():
        if n:
            ok.record(us, n)
    expected = [0] * (len(BUCKETS_US) + 1)
    add_to_buckets(ok, expected)
    assert points[frozenset({("name", "tools/call:echo")})] == (14, expected)
    count, counts = points[frozenset({("name", "tools/call:echo"), ("error.type", "RequestTimeout")})]
    assert count == 3 and counts[BUCKETS_US.index(100_000)] == 2 and counts[len(BUCKETS_US) - 1] == 1  # past 60 s: at 60 s
    assert len(BOUNDS_S) == len(BUCKETS_US) and BOUNDS_S[0] == 50e-6 and BOUNDS_S[-1] == 60.0
    mcp = _points(tables, MCP_DURATION)
    assert sum(c for c, _ in mcp.values()) == 17
    failed = [attrs for attrs in mcp if ("error.type", "timeout") in attrs]
    assert len(failed) == 1 and mcp[failed[0]][0] == 3


def test_each_kind_of_failure_keeps_its_own_latencies() -> None:
    tables = Tables()
    by_reason = [("timeout", [(5_000_000, 1)]), ("http 503", [(100, 2)]), ("connect failed (refused)", [(40, 1)]), ("io error", [(60, 1)])]
    tables.add_rows([_row("tools/call:echo", {40: 1, 60: 1, 100: 3, 5_000_000: 1}, {40: 1, 60: 1, 100: 2, 5_000_000: 1}, [], by_reason)])
    points = _points(tables, LOCUST_DURATION)
    kinds = {dict(attrs).get("error.type"): point for attrs, point in points.items()}
    assert {kind: count for kind, (count, _) in kinds.items()} == {
        None: 1,
        "RequestTimeout": 1,
        "HttpStatusError": 2,
        "ConnectionFailure": 2,
    }
    assert kinds["RequestTimeout"][1][BUCKETS_US.index(5_000_000)] == 1  # its own latency, not the 503s'
    assert sum(kinds["HttpStatusError"][1][: BUCKETS_US.index(100) + 1]) == 2
    mcp = {dict(attrs).get("error.type"): count for attrs, (count, _) in _points(tables, MCP_DURATION).items()}
    assert mcp == {None: 1, "timeout": 1, "503": 2, "connection": 2}


def test_a_row_without_the_split_counts_several_kinds_under_other() -> None:
    tables = Tables()
    tables.add_rows([_row("tools/call:echo", {100: 4}, {100: 3}, [("timeout", 1), ("http 503", 2)])])
    points = _points(tables, LOCUST_DURATION)
    assert points[frozenset({("name", "tools/call:echo"), ("error.type", MIXED.locust)})][0] == 3
    assert points[frozenset({("name", "tools/call:echo")})][0] == 1


def test_python_requests_feed_only_the_mcp_metric() -> None:
    from mcpfast.client.errors import McpError

    tables = Tables()
    tables.add_request("mcp-http", "tools/call:echo", 0.25, None)
    tables.add_request("mcp-http", "tools/call:echo", 1.5, McpError(-32602))
    tables.add_request("mcp-http", "DELETE", 0.1, None)  # no MCP request
    tables.add_request("mcp-http", "tools/call:echo", None, None)  # no latency: nothing to record
    assert tables.points(LOCUST_DURATION) == []  # Locust's own listener records these
    mcp = _points(tables, MCP_DURATION)
    assert sorted(c for c, _ in mcp.values()) == [1, 1]
    assert any(("rpc.response.status_code", "-32602") in attrs for attrs in mcp)


def test_delta_points_add_up_to_the_cumulative_ones() -> None:
    tables = Tables()
    tables.add_rows([_row("initialize", {300: 2})])
    first = tables.points(LOCUST_DURATION, delta=True)
    tables.close_window()
    assert tables.points(LOCUST_DURATION, delta=True) == []  # nothing new: no point
    tables.add_rows([_row("initialize", {700: 1})])
    second = tables.points(LOCUST_DURATION, delta=True)
    assert [p.count for p in first + second] == [2, 1]
    assert (second[0].min_s, second[0].max_s) == (700e-6, 700e-6)  # the window's own
    assert tables.points(LOCUST_DURATION)[0].count == 3


def test_the_sdk_data_carries_locusts_metric_and_the_conventions() -> None:
    from opentelemetry.sdk.metrics.export import AggregationTemporality
    from opentelemetry.sdk.resources import Resource

    tables = Tables()
    tables.add_rows([_row("tools/call:echo", {120: 5})])
    export = OtelExport(tables, Resource.create({"service.name": "locust"}), [], 1.0, names=lambda name: name.upper())
    data = export.metrics_data()
    (resource_metrics,) = data.resource_metrics
    by_name = {m.name: (sm.scope.name, m) for sm in resource_metrics.scope_metrics for m in sm.metrics}
    scope, locust_metric = by_name[LOCUST_DURATION]
    assert scope == "locust" and locust_metric.unit == "s"
    (point,) = locust_metric.data.data_points
    assert dict(point.attributes) == {"name": "TOOLS/CALL:ECHO"} and point.count == 5
    assert list(point.explicit_bounds) == list(BOUNDS_S) and point.sum == pytest.approx(600e-6)
    assert locust_metric.data.aggregation_temporality == AggregationTemporality.CUMULATIVE
    assert by_name[MCP_DURATION][0] == "mcpfast"
    assert OtelExport(Tables(), Resource.create({}), [], 1.0).metrics_data() is None


# -- a real collector ---------------------------------------------------------------------------------------------
class Collector:
    """``otelcol-mcpfast`` on free 127.0.0.1 ports (gRPC and HTTP), its metrics in a JSON-lines file."""

    def __init__(self, folder: Path) -> None:
        if not os.access(OTELCOL, os.X_OK):
            pytest.fail(f"the OpenTelemetry Collector is not built ({OTELCOL}): run `make otelcol-install`")
        folder.mkdir(parents=True, exist_ok=True)
        self.out = folder / "metrics.jsonl"
        self.log = folder / "otelcol.log"
        config = folder / "otelcol.yaml"
        for attempt in range(3):
            # A free port may be taken by another test's process before the collector binds it:
            # then it says so and exits, and the next attempt takes other ports.
            self.grpc, self.http = free_port(), free_port()
            config.write_text(
                "receivers:\n  otlp:\n    protocols:\n"
                f"      grpc:\n        endpoint: 127.0.0.1:{self.grpc}\n"
                f"      http:\n        endpoint: 127.0.0.1:{self.http}\n"
                f"exporters:\n  file:\n    path: {self.out}\n    flush_interval: 100ms\n"
                "service:\n  telemetry:\n    metrics:\n      level: none\n    logs:\n      level: warn\n"
                "  pipelines:\n    metrics:\n      receivers: [otlp]\n      exporters: [file]\n"
            )
            try:
                with open(self.log, "wb") as log:
                    self.proc = start_process(
                        ["timeout", "120", str(OTELCOL), "--config", str(config)],
                        self.grpc,
                        "otelcol",
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                return
            except RuntimeError:
                if attempt == 2 or b"address already in use" not in self.log.read_bytes():
                    raise

    def received(self) -> dict[tuple[str, frozenset], tuple[int, list[int]]]:
        """Stop the collector (it flushes its file) and read back every histogram's last cumulative
        point per (process, metric, attributes), added up over the processes: ``{(metric, attributes):
        (count, bucket counts)}``."""
        stop(self.proc)
        last: dict[tuple, dict] = {}
        for line in self.out.read_text().splitlines():
            for rm in json.loads(line)["resourceMetrics"]:
                resource = json.dumps(rm["resource"], sort_keys=True)
                for sm in rm["scopeMetrics"]:
                    for metric in sm["metrics"]:
                        for point in metric.get("histogram", {}).get("dataPoints", []):
                            attrs = frozenset((a["key"], str(*a["value"].values())) for a in point.get("attributes", []))
                            key = (resource, metric["name"], attrs)
                            if key not in last or int(point["timeUnixNano"]) >= int(last[key]["timeUnixNano"]):
                                last[key] = point
        out: dict[tuple[str, frozenset], tuple[int, list[int]]] = {}
        for (_, metric, attrs), point in last.items():
            count, counts = out.get((metric, attrs), (0, []))
            # instruments' bounds differ (Locust's own histogram keeps the SDK's default ones)
            added = [a + int(b) for a, b in itertools.zip_longest(counts, point.get("bucketCounts", []), fillvalue=0)]
            out[(metric, attrs)] = (count + int(point["count"]), added)
        return out


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[Collector]:
    c = Collector(tmp_path / "otelcol")
    yield c
    stop(c.proc)


@pytest.fixture
def server() -> Iterator[str]:
    proc, url = start_reference_server(lifetime=90)
    yield url
    stop(proc)


def run_locust(tmp_path: Path, name: str, locustfile: str, *args: str, **env: str) -> tuple[subprocess.CompletedProcess, Path]:
    prefix = tmp_path / name
    cmd = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        str(LOADTESTS / locustfile),
        "--headless",
        "--csv",
        str(prefix),
        "--only-summary",
        "--stop-timeout",
        "3",
        "--exit-code-on-error",
        "0",
        "-u",
        "2",
        "-r",
        "2",
        "-t",
        "2s",
        "--otel",
        *args,
    ]
    otel = {"OTEL_METRIC_EXPORT_INTERVAL": "500", "OTEL_TRACES_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none", **env}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=90, env=child_env(**otel), cwd=tmp_path)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
    return proc, prefix


def stats_csv(prefix: Path) -> dict[str, tuple[int, int]]:
    """``{name: (requests, failures)}`` of ``_stats.csv`` (one request type per run)."""
    with open(f"{prefix}_stats.csv", newline="") as fh:
        return {r["Name"]: (int(r["Request Count"]), int(r["Failure Count"])) for r in csv.DictReader(fh) if r["Name"] != "Aggregated"}


def by_name(received: dict[tuple[str, frozenset], tuple[int, list[int]]]) -> dict[str, tuple[int, int]]:
    """``locust.client.duration`` as ``{name: (requests, failures)}`` (a failure has ``error.type``)."""
    out: dict[str, tuple[int, int]] = {}
    for (metric, attrs), (count, _) in received.items():
        if metric != LOCUST_DURATION:
            continue
        a = dict(attrs)
        n, f = out.get(a["name"], (0, 0))
        out[a["name"]] = (n + count, f + (count if "error.type" in a else 0))
    return out


def mcp_by_operation(received: dict[tuple[str, frozenset], tuple[int, list[int]]]) -> dict[tuple[str, str], tuple[int, int]]:
    out: dict[tuple[str, str], tuple[int, int]] = {}
    for (metric, attrs), (count, _) in received.items():
        if metric != MCP_DURATION:
            continue
        a = dict(attrs)
        key = (a["mcp.method.name"], a.get("gen_ai.tool.name", ""))
        n, f = out.get(key, (0, 0))
        out[key] = (n + count, f + (count if "error.type" in a else 0))
    return out


def expected_mcp(rows: dict[str, tuple[int, int]]) -> dict[tuple[str, str], tuple[int, int]]:
    out: dict[tuple[str, str], tuple[int, int]] = {}
    for name, (n, f) in rows.items():
        attrs = mcp_attributes("mcp-http", name)
        if attrs is not None:
            a = dict(attrs)
            key = (a["mcp.method.name"], a.get("gen_ai.tool.name", ""))
            before = out.get(key, (0, 0))
            out[key] = (before[0] + n, before[1] + f)
    return out


@pytest.mark.slow
def test_a_native_run_reaches_the_collector_with_the_counts_of_stats_csv(tmp_path: Path, collector: Collector, server: str) -> None:
    # mixed: tools/call of a tool the server lacks fails (-32602), tools/list succeeds; two processes
    # (--processes 2), each exporting its own requests over gRPC
    proc, prefix = run_locust(
        tmp_path,
        "native",
        "mixed.py",
        "--host",
        server,
        "--mcp-engine",
        "native",
        "--mcp-tool",
        "nosuchtool",
        "--processes",
        "2",
        OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{collector.grpc}",
    )
    assert "mcpfast: OpenTelemetry metrics of every request" in proc.stderr
    rows = stats_csv(prefix)
    assert rows["tools/call:nosuchtool"][1] == rows["tools/call:nosuchtool"][0] > 0 and rows["tools/list"] == (rows["tools/list"][0], 0)
    received = collector.received()
    assert by_name(received) == rows
    assert {dict(a).get("error.type") for (m, a) in received if m == LOCUST_DURATION} == {None, "McpError"}
    assert mcp_by_operation(received) == expected_mcp(rows)
    # the buckets are the run's µs histograms cut at the Prometheus exporter's bounds
    hist = json.loads(Path(f"{prefix}_histograms.json").read_text())
    for entry in hist["histograms"] + hist["failed_histograms"]:
        counts = [0] * (len(BUCKETS_US) + 1)
        add_to_buckets(Histogram.from_dict(entry), counts)
        failure = {("error.type", "McpError")} if entry in hist["failed_histograms"] else set()
        assert received[(LOCUST_DURATION, frozenset({("name", entry["name"])} | failure))][1] == counts, entry["name"]


@pytest.mark.slow
def test_a_native_run_names_each_kind_of_failure_with_its_own_latencies(tmp_path: Path, collector: Collector) -> None:
    # the fake server's flaky tool fails every call, one in two as a tool error after 5 ms, the
    # other at once with -32603: both kinds in every drained second of one row
    proc, url = start_http_server(FAKE, tmp_path, lifetime=60)
    try:
        _, prefix = run_locust(
            tmp_path, "flaky", "tools_call.py", "--host", url, "--mcp-engine", "native", "--mcp-tool", "flaky",
            OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{collector.grpc}",
        )  # fmt: skip
    finally:
        stop(proc)
    with open(f"{prefix}_failures.csv", newline="") as fh:
        occurrences = {r["Error"]: int(r["Occurrences"]) for r in csv.DictReader(fh)}
    received = collector.received()
    kinds = {
        dict(attrs).get("error.type"): point
        for (metric, attrs), point in received.items()
        if metric == LOCUST_DURATION and dict(attrs)["name"] == "tools/call:flaky"
    }
    assert set(kinds) == {"ToolError", "McpError"}, kinds  # no "_OTHER", no success
    tool_errors = sum(n for reason, n in occurrences.items() if "isError" in reason)
    rpc_errors = sum(n for reason, n in occurrences.items() if "-32603" in reason)
    assert tool_errors > 0 and rpc_errors > 0 and tool_errors + rpc_errors == sum(occurrences.values()), occurrences
    assert (kinds["ToolError"][0], kinds["McpError"][0]) == (tool_errors, rpc_errors)
    # each kind's own latencies (counts[:i]: the samples at or under 3 ms, the bound before 5 ms):
    # a tool error never, a quick error at least sometimes, however busy the machine
    under_5ms = BUCKETS_US.index(5_000)
    assert sum(kinds["ToolError"][1][:under_5ms]) == 0, kinds["ToolError"]
    assert sum(kinds["McpError"][1][:under_5ms]) > 0, kinds["McpError"]
    mcp = {
        dict(a).get("error.type"): count
        for (metric, a), (count, _) in received.items()
        if metric == MCP_DURATION and dict(a).get("gen_ai.tool.name") == "flaky"
    }
    assert mcp == {"tool_error": tool_errors, "-32603": rpc_errors}


@pytest.mark.slow
def test_a_python_run_reaches_the_collector_over_http(tmp_path: Path, collector: Collector, server: str) -> None:
    # Locust's own listener records locust.client.duration; mcpfast adds the conventions' metric
    _, prefix = run_locust(
        tmp_path,
        "python",
        "tools_call.py",
        "--host",
        server,
        "--mcp-engine",
        "python",
        OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{collector.http}",
        OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
    )
    rows = stats_csv(prefix)
    assert rows["tools/call:echo"][0] > 0
    received = collector.received()
    assert by_name(received) == rows
    assert mcp_by_operation(received) == expected_mcp(rows)


@pytest.mark.slow
def test_an_endpoint_that_is_down_is_said_once_and_loses_nothing(tmp_path: Path, server: str) -> None:
    with refused_port() as port:
        # every signal on (Locust's logs and traces too): each would log every failed try
        proc, prefix = run_locust(
            tmp_path,
            "down",
            "tools_call.py",
            "--host",
            server,
            "--mcp-engine",
            "native",
            OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}",
            OTEL_TRACES_EXPORTER="otlp",
            OTEL_LOGS_EXPORTER="otlp",
            OTEL_EXPORTER_OTLP_TIMEOUT="2",
        )
    output = proc.stdout + proc.stderr
    warnings = [line for line in output.splitlines() if re.search(r"/(WARNING|ERROR|CRITICAL)/.*(telemetry|export)", line, re.I)]
    assert len(warnings) == 1 and "mcpfast: OpenTelemetry export failed" in warnings[0], warnings
    assert not re.search(r"/(WARNING|ERROR|CRITICAL)/opentelemetry", output) and "Traceback" not in output, output[-3000:]
    assert re.search(r"OpenTelemetry metric exports of mcpfast failed; [1-9]\d* exporter messages not shown", output), output[-3000:]
    rows = stats_csv(prefix)
    hist = json.loads(Path(f"{prefix}_histograms.json").read_text())
    assert rows["tools/call:echo"][0] > 0
    assert {h["name"]: h["n"] for h in hist["histograms"]} == {name: n for name, (n, _) in rows.items()}
