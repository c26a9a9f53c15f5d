"""``locust -f loadtests/agents.py`` in headless runs against a server with items to create, read
and delete (``apps:items``): a chained workload runs without a failure, a value missing from a
step's result fails the steps that need it by name, bad input stops the run before any load,
a server refusing past a count is named, and a master with two workers counts the agents as one
process does."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest
from _agents_support import items_server, run_agents, workload
from _support import locust_master_args

from mcpfast import core
from mcpfast.client.probe import METRIC_SESSIONS, metrics_url, parse_metrics

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(not core.HAS_NATIVE_ENGINE, reason="agents run on the native engine (the compiled core)"),
]

CHAIN = """\
think = {{dist = "constant", value = 0.02}}
idle = 0.02

[[ops]]
name = "create"
op = "tools/call"
tool = "create"
arguments = {{title = "hello"}}

[[ops]]
op = "tools/call"
tool = "get"
arguments = {{id = {{from = "create", pointer = "{pointer}"}}}}

[[ops]]
op = "tools/call"
tool = "delete"
arguments = {{id = {{from = "create", pointer = "{pointer}"}}}}
"""


def open_sessions(url: str) -> float | None:
    """The server's own count of the sessions open (its /metrics)."""
    with urllib.request.urlopen(metrics_url(url), timeout=5) as reply:
        return parse_metrics(reply.read().decode(), (METRIC_SESSIONS,)).get(METRIC_SESSIONS)


def test_a_chained_workload_creates_reads_and_deletes_by_the_returned_id(tmp_path: Path) -> None:
    with items_server("--metrics") as url:
        run = run_agents(
            tmp_path, "-u", "4", "-r", "4", "-t", "3s", "--host", url, "--mcp-scenario", workload(tmp_path, CHAIN.format(pointer="/id"))
        )
        # every session ended: the agents' and the one the check before the run opened
        assert open_sessions(url) == 0
    assert run.code == 0, run.output[-3000:]
    assert run.failed() == {}, run.failed()
    ok = run.ok()
    # the server answers get and delete only for an id it created and has not deleted yet
    assert ok["tools/call:create"] >= ok["tools/call:get"] >= ok["tools/call:delete"] > 10, ok
    assert ok["tools/list"] == ok["initialize"] == ok["notifications/initialized"], ok
    agents = run.histograms()["agents"]
    # the sessions the stop cut short are DELETEd too, and are not in the figures
    assert agents["agents"] == 4 and agents["sessions"] <= ok["DELETE"] <= agents["sessions"] + 4, (agents, ok)
    figures = agents["figures"]
    assert figures["steps"]["summary"]["p50"] == 3 and figures["think"]["unit"] == "ms"
    # a think time before each step
    assert figures["think"]["summary"]["count"] == ok["tools/call:create"] + ok["tools/call:get"] + ok["tools/call:delete"]
    assert "Little's law:" in run.output and "sessions/s x" in run.output, run.output[-2000:]


def test_a_value_missing_from_a_result_fails_the_steps_that_need_it_by_name(tmp_path: Path) -> None:
    with items_server() as url:
        run = run_agents(
            tmp_path, "-u", "2", "-r", "2", "-t", "2s", "--host", url, "--mcp-scenario", workload(tmp_path, CHAIN.format(pointer="/nope"))
        )
    assert run.code == 1, run.output[-3000:]  # Locust's exit code for failed requests
    failures = run.failures()
    reason = "no value for /arguments/id: step create gave no structuredContent /nope"
    assert {name for name, _ in failures} == {"tools/call:get", "tools/call:delete"}, failures
    assert {why for _, why in failures} == {reason}, failures
    assert 0 < failures[("tools/call:get", reason)] <= run.ok()["tools/call:create"], (run.ok(), failures)


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (("--mcp-think", "lognormal:2:1"), "--mcp-think: engine config: think: lognormal:2:1: p90 (1) is below the median (2)"),
        (
            ("--mcp-source-address", "192.0.2.7"),
            "--mcp-source-address: engine config: source_addresses: 192.0.2.7 is not an address of this host",
        ),
    ],
)
def test_bad_input_stops_the_run_before_any_load(tmp_path: Path, args: tuple[str, ...], error: str) -> None:
    with items_server() as url:
        run = run_agents(
            tmp_path, "-u", "2", "-t", "5s", "--host", url, "--mcp-scenario", workload(tmp_path, CHAIN.format(pointer="/id")), *args
        )
    assert run.code == 2, run.output[-3000:]
    assert f"mcpfast agents error: {error}" in run.output, run.output[-3000:]
    assert "native engine started" not in run.output


def test_a_step_read_from_a_step_that_does_not_exist_stops_the_run(tmp_path: Path) -> None:
    text = CHAIN.format(pointer="/id").replace('from = "create"', 'from = "crate"', 1)
    run = run_agents(tmp_path, "-u", "1", "-t", "5s", "--host", "http://127.0.0.1:9/mcp", "--mcp-scenario", workload(tmp_path, text))
    assert run.code == 2, run.output[-3000:]
    assert "agent.toml:11: /arguments/id is taken from step 'crate', and no step has that name" in run.output, run.output[-3000:]


def test_a_server_refusing_past_a_count_is_named_and_the_run_goes_on(tmp_path: Path) -> None:
    with items_server("--max-connections", "3") as url:
        run = run_agents(
            tmp_path, "-u", "6", "-r", "6", "-t", "3s", "--host", url, "--mcp-scenario", workload(tmp_path, CHAIN.format(pointer="/id"))
        )
    failures = run.failures()
    refused = {why for name, why in failures if name == "initialize"}
    # the reason says the limit and the wait the server asked for
    assert any(why.startswith("http 503 too many connections") for why in refused), failures
    # the agents that have a connection go on
    assert run.ok()["tools/call:delete"] > 5, run.ok()


@pytest.mark.serial
def test_a_master_and_two_workers_count_the_agents_as_one_process_does(tmp_path: Path) -> None:
    path = workload(tmp_path, CHAIN.format(pointer="/id"))
    common = ("-u", "4", "-r", "4", "-t", "4s", "--mcp-agents-per-user", "3", "--mcp-scenario", path)
    with items_server() as url:
        one = run_agents(tmp_path, *common, "--host", url)
        two = run_agents(tmp_path, *common, "--host", url, "--processes", "2", *locust_master_args())
    for run, processes in ((one, 1), (two, 2)):
        assert run.code == 0, run.output[-3000:]
        agents = run.histograms()["agents"]
        assert (agents["agents"], agents["locust_users"], agents["agents_per_user"], agents["processes"]) == (12, 4, 3, processes), agents
        ok = run.ok()
        # a think time before each step: the merged figures count what the merged rows count
        think = agents["figures"]["think"]["summary"]["count"]
        assert think == ok["tools/call:create"] + ok["tools/call:get"] + ok["tools/call:delete"] > 0, (agents, ok)
        assert agents["figures"]["steps"]["summary"]["count"] == agents["sessions"] <= ok["DELETE"]
        assert agents["littles_law"]["agents"] == 12
