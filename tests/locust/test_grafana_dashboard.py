"""docs/grafana/mcpfast-swarm.json, the Grafana dashboard over ``--mcp-prometheus-port``: valid
JSON that Grafana can import (panels with datasource, targets and positions; the ``testid``
template variable), every PromQL expression valid for Prometheus' own checker (promtool, from
``make prometheus-install``) and reading only metric names and labels that the exporter serves -
taken from a scrape of the real exporter in this process, not from a list kept here."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from _support import REPO_ROOT
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from mcpfast.locust.histogram import HistogramSet
from mcpfast.locust.prometheus import SwarmCollector

DASHBOARD = REPO_ROOT / "docs" / "grafana" / "mcpfast-swarm.json"
# Grafana's variables in an expression, as a concrete query would have them
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$__range": "1h", "$testid": "t1", "$name": ".*"}
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset", "and", "or", "unless", "le", "inf", "nan"}


def served() -> tuple[set[str], set[str]]:
    """The sample names and label names of a scrape of the exporter over one row of each kind."""
    ok, failed = HistogramSet(), HistogramSet()
    ok.record("mcp-http", "tools/call:echo", 120)
    failed.record("mcp-http", "tools/call:echo", 90_000)
    entry = SimpleNamespace(method="mcp-http", name="tools/call:echo", num_requests=2, num_failures=1)
    environment = SimpleNamespace(
        stats=SimpleNamespace(entries={("tools/call:echo", "mcp-http"): entry}), runner=SimpleNamespace(user_count=2)
    )
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SwarmCollector(environment, SimpleNamespace(ok=ok, failed=failed), "t1"))
    samples = [s for family in text_string_to_metric_families(generate_latest(registry).decode()) for s in family.samples]
    return {s.name for s in samples}, {label for s in samples for label in s.labels}


def expressions(dashboard: dict) -> list[str]:
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def concrete(expr: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    assert "$" not in expr, expr
    return expr


def test_the_dashboard_is_importable_json() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["title"] and dashboard["uid"] and isinstance(dashboard["schemaVersion"], int)
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert variables["testid"]["type"] == "query" and "testid" in variables["testid"]["definition"]
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        assert panel["type"] in {"timeseries", "stat", "table"} and panel["title"] and panel["description"]
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert {"x", "y", "w", "h"} <= set(panel["gridPos"]) and panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
        assert panel["targets"] and all(t["refId"] and t["expr"] for t in panel["targets"])
    # every panel is about one run: the testid variable filters each expression
    assert all('testid=~"$testid"' in expr for expr in expressions(dashboard))


def test_every_expression_reads_what_the_exporter_serves() -> None:
    names, labels = served()
    assert {"mcpfast_swarm_requests_total", "mcpfast_swarm_request_duration_microseconds_bucket"} <= names
    dashboard = json.loads(DASHBOARD.read_text())
    used: set[str] = set()
    for expr in expressions(dashboard):
        text = re.sub(r'"[^"]*"', '""', concrete(expr))  # label values and regexes are no names
        selectors = re.findall(r"([A-Za-z_:][\w:]*)\s*\{", text)
        assert selectors, expr
        used |= set(selectors)
        assert set(selectors) <= names, (expr, set(selectors) - names)
        for grouping in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", text):
            assert {g.strip() for g in grouping.split(",")} <= labels, (expr, grouping)
        for matcher in re.findall(r"[{,]\s*(\w+)\s*[=!]~?", text):
            assert matcher in labels, (expr, matcher)
        # anything else that looks like a metric name is one of the exporter's
        functions = set(re.findall(r"\b([a-z_]+)\s*(?:\(|(?:by|without)\s*\()", text))  # sum by (...) (...) too
        words = set(re.findall(r"\b[a-z_][a-z0-9_]*\b", text)) - functions - PROMQL_WORDS - labels
        assert words <= names, (expr, words - names)
    # the request rate, the failures and the buckets all have a panel
    assert {"mcpfast_swarm_requests_total", "mcpfast_swarm_failures_total", "mcpfast_swarm_request_duration_microseconds_bucket"} <= used
    assert any("histogram_quantile(0.5," in e for e in expressions(dashboard))
    assert any("histogram_quantile(0.95," in e for e in expressions(dashboard))
    assert any("histogram_quantile(0.99," in e for e in expressions(dashboard))


def test_every_expression_is_valid_promql(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool is not installed: run `make prometheus-install` (Debian's prometheus)")
    dashboard = json.loads(DASHBOARD.read_text())
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [{"record": f"mcpfast:panel_{i}", "expr": concrete(e)} for i, e in enumerate(expressions(dashboard))],
            }
        ]
    }
    path = tmp_path / "rules.json"  # YAML is a superset of JSON: promtool reads it as is
    path.write_text(json.dumps(rules))
    proc = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{len(expressions(dashboard))} rules found" in proc.stdout, proc.stdout
