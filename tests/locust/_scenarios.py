"""In-process Locust scenarios for tests/locust/test_stats.py, run in a child interpreter.

Importing Locust monkey-patches the whole interpreter with gevent; doing that inside the pytest
process would change sockets, threads and time for every other test of the suite, so the stats
tests run these scenarios with ``python tests/locust/_scenarios.py <scenario> <out_dir>`` and read
the JSON summary printed as the last stdout line.  (The leading underscore keeps pytest from
collecting the file.)
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time

import gevent
import locust  # first, so gevent patches the stdlib before anything else imports it
import locust.runners
from locust import User, constant, task
from locust.argument_parser import get_parser
from locust.env import Environment
from locust.event import Events

from mcpfast.bench.procs import free_port
from mcpfast.locust import stats as mstats

RECORDS: dict[int, int] = {}  # id(environment) -> records made by that environment's users


class Recorder(User):
    """Tiny user: paces through the environment's pacer and records a synthetic latency."""

    wait_time = constant(0.005)

    @task
    def call(self) -> None:
        s = mstats.get(self.environment)
        intended = s.pacer.wait()
        # synthetic service time, deterministic per call: 100..1099 µs
        n = RECORDS.get(id(self.environment), 0)
        elapsed_us = 100 + (n * 37) % 1000 + int((time.perf_counter() - intended) * 1_000_000)
        failure = RuntimeError("synthetic failure") if n % 50 == 49 else None
        s.report("test", "tools/call:echo", elapsed_us, response_length=10, exception=failure)
        RECORDS[id(self.environment)] = n + 1
        s.validator("2025-11-25").check({"jsonrpc": "2.0", "id": n, "method": "ping"})


def _options(out: str, rate: float) -> argparse.Namespace:
    # Locust's real parser, with the --mcp-* options registered by importing mcpfast.locust.stats
    parser = get_parser(default_config_files=[])
    args = ["--headless", "--mcp-histogram-out", out, "--mcp-rate", str(rate), "--mcp-validate-share", "0.1"]
    return parser.parse_args(args)


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _capture_console() -> _Lines:
    handler = _Lines()
    console = logging.getLogger("locust.stats_logger")
    console.setLevel(logging.INFO)
    console.addHandler(handler)
    return handler


def _run_until(enough, at_least: float = 1.0, at_most: float = 20.0) -> None:
    """Let the users run ``at_least`` seconds and until ``enough()`` (a busy machine runs them
    slower: a fixed run time would make fewer records than the tests need), ``at_most`` seconds."""
    start = time.monotonic()
    while time.monotonic() - start < at_most and (time.monotonic() - start < at_least or not enough()):
        gevent.sleep(0.05)


def _wait(condition, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(what)
        gevent.sleep(0.05)


def local(out_dir: str) -> dict:
    table = _capture_console()
    env = Environment(user_classes=[Recorder], events=Events(), parsed_options=_options(f"{out_dir}/local", 400.0))
    runner = env.create_local_runner()
    s = mstats.install(env)
    runner.start(4, spawn_rate=100)
    _run_until(lambda: RECORDS.get(id(env), 0) >= 300)
    runner.quit()
    return {
        "records": RECORDS.get(id(env), 0),
        "locust_requests": runner.stats.total.num_requests,
        "locust_failures": runner.stats.total.num_failures,
        "path": s.written_path,
        "table": "\n".join(table.lines),
        "schedule": [s.schedule.worker_index, s.schedule.worker_count, s.schedule.runner_rate],
    }


def distributed(out_dir: str) -> dict:
    locust.runners.WORKER_REPORT_INTERVAL = 0.2  # exercise the periodic deltas, not only the final one
    table = _capture_console()
    port = free_port()
    options = _options(f"{out_dir}/dist", 400.0)
    master_env = Environment(user_classes=[Recorder], events=Events(), parsed_options=options)
    master = master_env.create_master_runner("127.0.0.1", port)
    master_stats = mstats.install(master_env)
    workers = []
    for _ in range(2):
        env = Environment(user_classes=[Recorder], events=Events())
        runner = env.create_worker_runner("127.0.0.1", port)
        mstats.install(env)
        workers.append((env, runner))
    _wait(lambda: len(master.clients.ready) == 2, "workers did not connect")

    result: dict = {"runs": []}
    # run 1 ends with stop() (web-UI path), run 2 with quit() (--run-time / headless path)
    for _run, finish in enumerate(("stop", "quit")):
        before = {id(env): RECORDS.get(id(env), 0) for env, _ in workers}
        master.start(4, spawn_rate=100)
        _run_until(lambda: sum(RECORDS.get(id(env), 0) - before[id(env)] for env, _ in workers) >= 300)  # noqa: B023
        schedules = sorted([s.worker_index, s.worker_count, s.runner_rate] for s in (mstats.get(env).schedule for env, _ in workers))
        if finish == "stop":
            master.stop()
        else:
            master.quit()
        _wait(lambda: master_stats.written_path is not None, "the master wrote no histograms")
        with open(master_stats.written_path, encoding="utf-8") as fh:
            data = json.load(fh)
        result["runs"].append(
            {
                "finish": finish,
                "worker_records": sum(RECORDS.get(id(env), 0) - before[id(env)] for env, _ in workers),
                "ok": sum(h["n"] for h in data["histograms"]),
                "failed": sum(h["n"] for h in data["failed_histograms"]),
                "complete": data["complete"],
                "pacer": {k: data["pacer"][k] for k in ("sent", "late", "dropped")},
                "validation": data["validation"],
                "workers": len(data["workers"] or []),
                "schedules": schedules,
            }
        )
        if finish == "stop":
            _wait(lambda: len(master.clients.ready) == 2, "workers did not report ready again")
            master_stats.written_path = None
    for _, runner in workers:
        runner.quit()
    result["table"] = "\n".join(table.lines)
    return result


def units(out_dir: str) -> dict:
    """Output-path defaults and the master's wait for final deltas, without a network."""
    parser = get_parser(default_config_files=[])
    env = Environment(user_classes=[Recorder], events=Events(), parsed_options=parser.parse_args(["--csv", "run/x"]))
    env.create_local_runner()
    s = mstats.install(env)
    prefixes = [mstats.output_prefix(env)]
    env.parsed_options.mcp_histogram_out = f"{out_dir}/units"
    prefixes.append(mstats.output_prefix(env))
    prefixes.append(mstats.output_prefix(Environment(events=Events())))
    s.reset()

    def final(worker: str, us: int) -> dict:
        s.record("test", "op", us)
        payload = s.take_delta(final=True)
        assert s.ok.total_count == 0  # the delta emptied the worker-side histograms
        return payload

    s.await_final(["w1", "w2"])
    s.merge_payload("w1", final("w1", 150))
    after_one = s.written_path
    pending = s.flush_pending()  # quitting before w2's final delta arrived
    with open(pending, encoding="utf-8") as fh:
        incomplete = json.load(fh)
    s.reset()
    s.await_final(["w1", "w2"])
    s.merge_payload("w1", final("w1", 150))
    s.merge_payload("w2", final("w2", 250))
    with open(s.written_path, encoding="utf-8") as fh:
        complete = json.load(fh)
    return {
        "prefixes": prefixes,
        "after_one": after_one,
        "incomplete": [incomplete["complete"], incomplete["missing_workers"], incomplete["histograms"][0]["n"]],
        "complete": [complete["complete"], complete["missing_workers"], complete["histograms"][0]["n"]],
        "flush_again": s.flush_pending(),
    }


if __name__ == "__main__":
    scenario, out = sys.argv[1], sys.argv[2]
    logging.basicConfig(level=logging.WARNING)
    summary = {"local": local, "distributed": distributed, "units": units}[scenario](out)
    sys.stdout.write("\n" + json.dumps(summary) + "\n")
    sys.stdout.flush()
