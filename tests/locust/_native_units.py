"""Checks of :mod:`mcpfast.locust.native` and the interval log on synthetic engine windows, run in a
child interpreter (Locust's import gevent-patches the process; see conftest.py).  Prints one JSON
line: what the bulk path put into Locust's tables next to what request-by-request logging puts
there for the same requests."""

from __future__ import annotations

import json
import random
import sys
from collections import defaultdict

import locust  # first
import locust.stats
from locust.stats import RequestStats

from mcpfast._core import DrainRow
from mcpfast.locust.native import feed_locust

REASONS = ("HTTP 503", "JSON-RPC -32603: boom")


def synthetic(seed: int, n: int, t0: int) -> tuple[list[tuple], list[DrainRow]]:
    """(requests, engine rows): requests = (type, name, µs, length, reason|None, epoch s)."""
    r = random.Random(seed)
    names = [("mcp-http", "tools/call:echo"), ("mcp-http", "DELETE"), ("mcp-stdio", "initialize")]
    reqs = []
    for i in range(n):
        rtype, name = names[r.randrange(3)]
        us = int(r.lognormvariate(6, 1.6)) + 1
        reason = REASONS[r.randrange(2)] if r.random() < 0.05 else None
        reqs.append((rtype, name, us, r.randrange(0, 500), reason, t0 + i * 3 // n))
    rows = []
    by_key = defaultdict(list)
    for q in reqs:
        by_key[(q[0], q[1])].append(q)
    for (rtype, name), qs in by_key.items():
        buckets = defaultdict(int)
        per_second = defaultdict(lambda: [0, 0])
        errors = defaultdict(int)
        for _, _, us, _, reason, sec in qs:
            buckets[us] += 1
            per_second[sec][0] += 1
            if reason:
                per_second[sec][1] += 1
                errors[reason] += 1
        ms = [q[2] / 1000.0 for q in qs]
        rows.append(
            DrainRow(
                rtype,
                name,
                len(qs),
                sum(1 for q in qs if q[4]),
                sum(ms),
                min(ms),
                max(ms),
                sum(q[3] for q in qs),
                sorted(buckets.items()),
                sorted((s, a, b) for s, (a, b) in per_second.items()),
                float(max(q[5] for q in qs)) + 0.5,
                sorted(errors.items()),
            )
        )
    return reqs, rows


def table(stats: RequestStats) -> dict:
    out = {}
    for (name, rtype), e in sorted(stats.entries.items()):
        out[f"{rtype} {name}"] = {
            "num_requests": e.num_requests,
            "num_failures": e.num_failures,
            "total_ms": round(e.total_response_time, 6),
            "min": e.min_response_time,
            "max": e.max_response_time,
            "length": e.total_content_length,
            "times": sorted(e.response_times.items()),
            "per_sec": sorted(e.num_reqs_per_sec.items()),
            "fail_per_sec": sorted(e.num_fail_per_sec.items()),
            "median": e.median_response_time,
            "p99": e.get_response_time_percentile(0.99),
        }
    t = stats.total
    out["Aggregated"] = {
        "num_requests": t.num_requests,
        "num_failures": t.num_failures,
        "times": sorted(t.response_times.items()),
        "per_sec": sorted(t.num_reqs_per_sec.items()),
    }
    out["errors"] = sorted((e.method, e.name, str(e.error), e.occurrences) for e in stats.errors.values())
    return out


def by_request(reqs: list[tuple]) -> RequestStats:
    stats = RequestStats(use_response_times_cache=False)
    for rtype, name, us, length, reason, sec in reqs:
        # what Locust's request event does, with the request's own second
        for entry in (stats.total, stats.entries[(name, rtype)]):
            entry.num_requests += 1
            entry.num_reqs_per_sec[sec] += 1
            entry._log_response_time(us / 1000.0)
            entry.total_content_length += length
            if reason:
                entry.num_failures += 1
                entry.num_fail_per_sec[sec] += 1
        if reason:
            key = locust.stats.StatsError.create_key(rtype, name, reason)
            stats.errors.setdefault(key, locust.stats.StatsError(rtype, name, reason)).occurred()
    return stats


class FakeEngine:
    """Hands out the given windows one drain at a time, then empty drains (an idle engine, the
    final drain after stop); its cumulative histograms hold everything handed out."""

    def __init__(self, windows: list[list[DrainRow]]) -> None:
        self.windows = windows
        self.given: list[DrainRow] = []

    def drain(self) -> list[DrainRow]:
        rows = self.windows.pop(0) if self.windows else []
        self.given += rows
        return rows

    def histograms(self) -> list[tuple]:
        return [(r.request_type, r.name, r.buckets) for r in self.given]

    def status(self) -> dict:
        return {"late": 3, "dropped": 1}


def driver_polls(rows: list[DrainRow]) -> dict:
    """A NativeDriver polling a fake engine (the first window with open model service/lag buckets): the µs
    histograms count each request once, however many empty polls follow; the send lag, late and
    dropped arrivals reach the pacer, the service times ``McpStats.service``."""
    from locust.env import Environment

    from mcpfast.locust.native import NativeDriver

    env = Environment()
    env.create_local_runner()
    d = NativeDriver(env, "tools_call", "http://127.0.0.1:1/mcp")
    # open model: service and lag buckets on the first window
    first = rows[0]
    fields = ("request_type", "name", "num_requests", "num_failures", "total_ms", "min_ms", "max_ms", "content_length")
    head = [getattr(first, f) for f in fields]
    wide = [DrainRow(*head, first.buckets, first.per_second, first.last_ts, first.errors, [], [(250, 2)], [(40, 2)]), *rows[1:]]
    d.engine = FakeEngine([wide[:1], [], wide[1:], [], []])
    for _ in range(5):
        d.poll()
    hist = sum(h.total_count for _, h in d.stats.ok.items()) + sum(h.total_count for _, h in d.stats.failed.items())
    sched = d.stats.schedule
    return {
        "hist": hist,
        "lag_n": sched.lag.total_count,
        "sent": sched.sent,
        "late": sched.late,
        "dropped": sched.dropped,
        "service_n": d.stats.service.total_count,
    }


def configs() -> dict:
    """What ``config_for`` makes of the ``--mcp-*`` options, read back from the typed config."""
    from types import SimpleNamespace

    from locust.env import Environment

    from mcpfast.locust import stats as mstats
    from mcpfast.locust.native import config_for

    def environment(**options: object) -> Environment:
        return Environment(parsed_options=SimpleNamespace(**options))

    url = "http://127.0.0.1:1/mcp"
    reach = environment(mcp_header=["x-api-key: k"], mcp_token="t", mcp_engine_threads=2, mcp_new_connection="session")
    http = config_for(reach, "tools_call", url)
    paced = environment()
    schedule = mstats.get(paced).schedule
    schedule.configure(40.0, 0, 2)  # this process: one of two runners
    mixed = config_for(paced, "mixed", url)
    stdio = config_for(environment(mcp_command="srv --flag 'a b'", mcp_stdio_inflight=4), "handshake", None)
    return {
        "http": [http.transport, http.url, http.headers, http.bearer_tokens, http.threads, http.new_connection],
        "http_defaults": [http.request_type, http.rate, http.arguments, http.family, http.mix, http.late_after_s],
        "mixed": [[m.tool, m.method, m.arguments, m.weight] for m in mixed.mix],
        "mixed_open_model": [mixed.rate, mixed.late_after_s, schedule.late_tolerance],
        "stdio": [stdio.transport, stdio.url, stdio.command, stdio.inflight_per_process, stdio.request_type, stdio.family],
    }


def main() -> None:
    if sys.argv[1:] == ["configs"]:
        json.dump(configs(), sys.stdout)
        print()
        return
    t0 = 1_800_000_000
    reqs, rows = synthetic(7, 5000, t0)
    bulk = RequestStats(use_response_times_cache=False)
    # two drains: the rows split in halves by key, as two poll windows would
    added = feed_locust(bulk, rows[:1]) + feed_locust(bulk, rows[1:])
    result = {"added": added, "n": len(reqs), "bulk": table(bulk), "single": table(by_request(reqs))}

    # custom bucketing set by a locustfile after import is honoured (looked up at call time)
    original = locust.stats.bucket_response_time
    locust.stats.bucket_response_time = lambda ms: 7
    custom = RequestStats(use_response_times_cache=False)
    feed_locust(custom, rows)
    locust.stats.bucket_response_time = original
    result["custom_keys"] = sorted({k for e in custom.entries.values() for k in e.response_times})
    result["driver"] = driver_polls(rows)
    json.dump(result, sys.stdout)
    print()


if __name__ == "__main__":
    main()
