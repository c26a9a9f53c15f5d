"""CI gates: ``--mcp-threshold`` expressions checked on the run's µs histograms at its end.

Grammar (one expression per ``--mcp-threshold``, repeatable)::

    [NAME ]METRIC OP VALUE[UNIT]

* ``NAME`` - a stats name as the run reports it (``tools/call:echo``, ``initialize``, ``DELETE``);
  optionally ``TYPE NAME`` is not needed: every request type with that name counts.  Without a
  name the metric is over every request of the run.
* ``METRIC`` - ``pNN`` (``p50``, ``p99``, ``p99.9``: latency percentile), ``mean``, ``min``,
  ``max`` (latency), ``rps`` (requests per second over the run), ``requests`` (count),
  ``failures`` (count), ``fail_ratio`` (failures / requests), ``fail%`` (the same in percent:
  ``fail% < 0.1`` is ``fail_ratio < 0.001``).
* ``OP`` - ``<``, ``<=``, ``>``, ``>=``.
* ``VALUE`` - a number; latency metrics take a unit ``us``, ``ms`` (default) or ``s``.

Latencies are read from the merged successes + failures histograms (a slow failure is not
hidden); counts from the same histograms, so the gate sees exactly what ``_histograms.json``
holds.  A name the run never reported fails its threshold ("no requests").  Every threshold is
printed with its measured value and ``pass``/``FAIL``, written into the summary JSON under
``"thresholds"``, and any failure sets the process exit code to 1.

:func:`parse` raises :class:`ThresholdError` (a ``ValueError``) naming what is wrong; the option
parser calls it, so a malformed threshold stops the run before any load is sent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from mcpfast.locust.histogram import Histogram

__all__ = ["Threshold", "ThresholdError", "argument_type", "evaluate", "parse"]

LATENCY_UNITS = {"us": 1.0, "µs": 1.0, "ms": 1000.0, "s": 1_000_000.0}
COUNT_METRICS = ("rps", "requests", "failures", "fail_ratio")
LATENCY_METRICS = ("mean", "min", "max")
OPS = {"<": float.__lt__, "<=": float.__le__, ">": float.__gt__, ">=": float.__ge__}
FAILED_EXIT_CODE = 1

_EXPR = re.compile(
    r"^\s*(?:(?P<name>.*\S)\s+)?(?P<metric>[A-Za-z_]+[0-9.]*%?)\s*(?P<op><=|>=|<|>)\s*"
    r"(?P<value>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(?P<unit>[A-Za-zµ]*)\s*$"
)


class ThresholdError(ValueError):
    """A malformed ``--mcp-threshold`` expression."""


@dataclass(frozen=True)
class Threshold:
    text: str
    name: str | None
    metric: str
    op: str
    value: float  # in µs for latency metrics
    unit: str

    @property
    def is_latency(self) -> bool:
        return self.metric not in COUNT_METRICS

    def percentile(self) -> float | None:
        return float(self.metric[1:]) if self.metric.startswith("p") else None


def parse(text: str) -> Threshold:
    m = _EXPR.match(text)
    if m is None:
        raise ThresholdError(
            f"threshold {text!r}: expected '[NAME ]METRIC OP VALUE[UNIT]', e.g. 'tools/call:echo p99<5ms', "
            "'fail_ratio<0.001', 'initialize rps>500'"
        )
    name, metric, op, unit = m["name"], m["metric"].lower(), m["op"], m["unit"]
    value = float(m["value"])
    if metric == "fail%":  # a percentage of requests, held as the ratio
        if not 0.0 <= value <= 100.0:
            raise ThresholdError(f"threshold {text!r}: fail% compares with a percentage in [0, 100], got {value:g}")
        metric, value = "fail_ratio", value / 100.0
    if metric.startswith("p") and metric not in COUNT_METRICS:
        try:
            p = float(metric[1:])
        except ValueError:
            raise ThresholdError(f"threshold {text!r}: percentile {metric!r} is not pNN (p50, p99, p99.9)") from None
        if not 0.0 < p <= 100.0:
            raise ThresholdError(f"threshold {text!r}: percentile {metric!r} must be in (0, 100]")
    elif metric not in COUNT_METRICS + LATENCY_METRICS:
        raise ThresholdError(
            f"threshold {text!r}: unknown metric {metric!r} (pNN, mean, min, max, rps, requests, failures, fail_ratio, fail%)"
        )
    if metric in COUNT_METRICS:
        if unit:
            raise ThresholdError(f"threshold {text!r}: {metric} takes no unit, got {unit!r}")
        scale, unit = 1.0, ""
    else:
        unit = unit or "ms"
        if unit not in LATENCY_UNITS:
            raise ThresholdError(f"threshold {text!r}: latency unit must be us, ms or s, got {unit!r}")
        scale = LATENCY_UNITS[unit]
    if metric == "fail_ratio" and not 0.0 <= value <= 1.0:
        raise ThresholdError(f"threshold {text!r}: fail_ratio compares with a ratio in [0, 1], got {value:g}")
    return Threshold(text.strip(), name, metric, op, value * scale, unit)


def argument_type(text: str) -> str:
    """argparse ``type=``: a malformed threshold is an option error (exit 2, before any load)."""
    import argparse

    try:
        parse(text)
    except ThresholdError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _select(histograms: list[dict[str, Any]], name: str | None) -> Histogram:
    h = Histogram()
    for entry in histograms:
        if name is None or entry["name"] == name:
            h.merge(Histogram.from_dict(entry))
    return h


def measure(t: Threshold, data: dict[str, Any]) -> float | None:
    """The measured value of ``t`` in ``data`` (the summary JSON's dict); None: nothing to measure."""
    ok = _select(data.get("histograms") or [], t.name)
    failed = _select(data.get("failed_histograms") or [], t.name)
    total = ok.total_count + failed.total_count
    if total == 0:
        return None
    if t.metric == "requests":
        return float(total)
    if t.metric == "failures":
        return float(failed.total_count)
    if t.metric == "fail_ratio":
        return failed.total_count / total
    if t.metric == "rps":
        duration = data.get("duration_s") or 0.0
        return total / duration if duration > 0 else None
    both = ok.copy().merge(failed)
    if t.metric == "mean":
        return float(both.mean)
    if t.metric == "min":
        return float(both.min)
    if t.metric == "max":
        return float(both.max)
    return float(both.value_at_percentile(t.percentile() or 100.0))


def _show(t: Threshold, value: float | None) -> str:
    if value is None:
        return "no requests"
    if t.is_latency:
        return f"{value / LATENCY_UNITS[t.unit]:.4g}{t.unit}"
    if t.metric == "fail_ratio":
        return f"{value:.6g}"
    return f"{value:.6g}"


def evaluate(texts: list[str], data: dict[str, Any]) -> list[dict[str, Any]]:
    """Every threshold's result: ``{"threshold", "measured", "measured_text", "passed"}``."""
    out = []
    for text in texts:
        t = parse(text)
        value = measure(t, data)
        passed = value is not None and OPS[t.op](float(value), t.value)
        out.append(
            {
                "threshold": t.text,
                "name": t.name,
                "metric": t.metric,
                "measured": value,
                "measured_unit": "us" if t.is_latency else None,
                "measured_text": _show(t, value),
                "passed": passed,
            }
        )
    return out


def render(results: list[dict[str, Any]]) -> str:
    lines = ["mcpfast thresholds:"]
    for r in results:
        lines.append(f"  {'pass' if r['passed'] else 'FAIL'}  {r['threshold']}  (measured {r['measured_text']})")
    failed = sum(1 for r in results if not r["passed"])
    lines.append(f"  {len(results) - failed} passed, {failed} failed")
    return "\n".join(lines)


def apply(environment: Any, data: dict[str, Any], texts: list[str]) -> list[dict[str, Any]] | None:
    """``McpStats.write_output`` hook: evaluate the ``--mcp-threshold`` ``texts`` on the run's
    summary dict, add them to it, print them, and make a failing gate the process's exit code."""
    if not texts:
        return None
    results = evaluate(texts, data)
    data["thresholds"] = results
    print(render(results), flush=True)
    if any(not r["passed"] for r in results):
        if not getattr(environment, "process_exit_code", None):  # keep a worse code (2: could not run)
            environment.process_exit_code = FAILED_EXIT_CODE
    elif getattr(environment, "process_exit_code", None) is None:
        environment.process_exit_code = 0
    return results


def evaluate_runs(texts: list[str], runs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """``mcpfast bench``: every threshold on every run (family/transport) that reported its name
    (a threshold without a name: on every run); a named threshold no run reported fails."""
    out = []
    for text in texts:
        t = parse(text)
        hits: list[dict[str, Any]] = []
        for label, data in runs.items():
            names = {e["name"] for e in (data.get("histograms") or []) + (data.get("failed_histograms") or [])}
            if t.name is None or t.name in names:
                hits.extend({**r, "run": label} for r in evaluate([text], data))
        if not hits:
            hits = [
                {
                    "threshold": t.text,
                    "name": t.name,
                    "metric": t.metric,
                    "measured": None,
                    "measured_unit": None,
                    "measured_text": "no requests in any run",
                    "passed": False,
                    "run": None,
                }
            ]
        out.extend(hits)
    return out


def render_runs(results: list[dict[str, Any]]) -> str:
    lines = ["thresholds:"]
    for r in results:
        where = f" [{r['run']}]" if r.get("run") else ""
        lines.append(f"  {'pass' if r['passed'] else 'FAIL'}  {r['threshold']}{where}  (measured {r['measured_text']})")
    failed = sum(1 for r in results if not r["passed"])
    lines.append(f"  {len(results) - failed} passed, {failed} failed")
    return "\n".join(lines)
