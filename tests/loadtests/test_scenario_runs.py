"""Workload files, --mcp-discover and --mcp-threshold in real headless Locust runs: against the
reference server and against a server nobody here wrote, ``@modelcontextprotocol/server-everything``
(pinned in peers/everything/package-lock.json, installed by ``make peers-install``), over HTTP and
stdio, on both engines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _loadtest_support import LOADTESTS, REPO_ROOT, Run, child_env, locust_command, start_counting_server, stop
from _support import free_port, start_process

from mcpfast.locust.options import native_available

EVERYTHING = REPO_ROOT / "peers" / "everything"
EVERYTHING_JS = EVERYTHING / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
SCENARIO = os.path.join(LOADTESTS, "scenario.py")
ENGINES = ["native", "python"] if native_available() else ["python"]


def everything_command(mode: str) -> list[str]:
    if not EVERYTHING_JS.exists():
        pytest.fail("server-everything is not installed: run `make peers-install`")
    # --require localhost.cjs: it binds 127.0.0.1, not every interface
    return ["node", "--require", str(EVERYTHING / "localhost.cjs"), str(EVERYTHING_JS), mode]


def everything_env(port: int | None = None) -> dict[str, str]:
    env = dict(child_env())
    env["GZIP_ALLOWED_DOMAINS"] = "127.0.0.1"  # its gzip tool would fetch from the internet otherwise
    if port is not None:
        env["PORT"] = str(port)
    return env


@pytest.fixture
def everything_http() -> Iterator[str]:
    port = free_port()
    cmd = ["timeout", "240", *everything_command("streamableHttp")]
    proc = start_process(cmd, port, "server-everything", env=everything_env(port))
    yield f"http://127.0.0.1:{port}/mcp"
    stop(proc)


def locust(
    tmp_path: Path,
    locustfile: str,
    *args: str,
    timeout: float = 120.0,
    env: dict | None = None,
) -> tuple[subprocess.CompletedProcess, Run]:
    prefix = tmp_path / f"run{len(list(tmp_path.glob('run*_histograms.json')))}-{time.monotonic_ns()}"
    cmd = locust_command(locustfile, prefix, *args)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env or child_env(), cwd=tmp_path)
    return proc, Run(prefix, proc)


def counts(run: Run) -> tuple[dict[str, int], dict[str, int]]:
    data = run.histograms()
    ok = {h["name"]: h["n"] for h in data["histograms"]}
    failed = {h["name"]: h["n"] for h in data["failed_histograms"]}
    return ok, failed


# -- server-everything -------------------------------------------------------------------------------------
@pytest.mark.parametrize("engine", ENGINES)
def test_discover_against_server_everything_http(tmp_path: Path, everything_http: str, engine: str) -> None:
    proc, run = locust(
        tmp_path,
        SCENARIO,
        "-u",
        "4",
        "-r",
        "4",
        "-t",
        "4s",
        "--host",
        everything_http,
        "--mcp-discover",
        "--mcp-discover-skip",
        "trigger-long-running-operation",
        "--mcp-engine",
        engine,
    )
    assert proc.returncode == 0, run.output[-4000:]
    ok, failed = counts(run)
    assert failed == {}, failed
    tools = {n for n, c in ok.items() if n.startswith("tools/call:") and c}
    assert len(tools) >= 5, tools
    assert ok.get("resources/read", 0) > 0, ok


def test_discover_against_server_everything_stdio(tmp_path: Path) -> None:
    command = " ".join(everything_command("stdio"))
    engine = ENGINES[0]
    proc, run = locust(
        tmp_path,
        SCENARIO,
        "-u",
        "2",
        "-r",
        "2",
        "-t",
        "4s",
        "--mcp-command",
        command,
        "--mcp-discover",
        "--mcp-discover-skip",
        "trigger-long-running-operation",
        "--mcp-engine",
        engine,
        env=everything_env(),
    )
    assert proc.returncode == 0, run.output[-4000:]
    ok, failed = counts(run)
    assert failed == {}, failed
    assert all(h["type"] == "mcp-stdio" for h in run.histograms()["histograms"])
    tools = {n for n, c in ok.items() if n.startswith("tools/call:") and c}
    assert len(tools) >= 5, tools
    assert ok.get("resources/read", 0) > 0, ok


def test_scenario_dump_prints_the_mix_and_exits(tmp_path: Path, everything_http: str) -> None:
    proc, _run = locust(
        tmp_path,
        SCENARIO,
        "-u",
        "1",
        "-t",
        "5s",
        "--host",
        everything_http,
        "--mcp-discover",
        "--mcp-discover-skip",
        "trigger-long-running-operation",
        "--mcp-scenario-dump",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    dumped = json.loads(proc.stdout[proc.stdout.index("{") :])
    ops = dumped["users"][0]["ops"]
    assert {
        "op": "tools/call",
        "weight": 10,
        "tool": "echo",
        "arguments": {"message": "mcpfast"},
        "note": "arguments generated from inputSchema",
    } in ops
    reasons = {e["op"]: e["reason"] for e in dumped["excluded"]}
    assert reasons["tools/call:trigger-long-running-operation"] == "--mcp-discover-skip"
    assert "tools/call:gzip-file-as-resource" in reasons  # its default URL is refused: no outside network
    assert not list(tmp_path.glob("run*_histograms.json"))  # no test ran


@pytest.mark.parametrize("engine", ENGINES)
def test_sse_streaming_long_running_operation(tmp_path: Path, everything_http: str, engine: str) -> None:
    steps = 4
    proc, run = locust(
        tmp_path,
        os.path.join(LOADTESTS, "sse_streaming.py"),
        "-u",
        "3",
        "-r",
        "3",
        "-t",
        "4s",
        "--host",
        everything_http,
        "--mcp-engine",
        engine,
        "--mcp-stream-tool",
        "trigger-long-running-operation",
        "--mcp-stream-args",
        json.dumps({"duration": 0.2, "steps": steps}),
    )
    assert proc.returncode == 0, run.output[-4000:]
    ok, failed = counts(run)
    assert failed == {}, failed
    calls = ok["tools/call:trigger-long-running-operation"]
    assert calls >= 3
    assert ok["progress:first-event"] == calls  # every call reported its progress
    assert ok["progress:gap"] == (steps - 1) * calls  # one notification per step, no more, no less


# -- thresholds and bad input against the reference server -----------------------------------------------------
@pytest.fixture
def counting(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    proc, url, countfile = start_counting_server("mcpfast", tmp_path)
    yield url, countfile
    stop(proc)


@pytest.mark.parametrize("engine", ENGINES)
def test_threshold_pass_and_fail_exit_codes(tmp_path: Path, counting: tuple[str, Path], engine: str) -> None:
    url, _countfile = counting
    base = ("-f", os.path.join(LOADTESTS, "tools_call.py"))
    common = [
        "-u",
        "2",
        "-r",
        "2",
        "-t",
        "4s",
        "--host",
        url,
        "--mcp-engine",
        engine,
        "--mcp-tool",
        "counted",
        "--mcp-tool-args",
        '{"text": "x"}',
    ]
    proc, run = locust(
        tmp_path,
        base[1],
        *common,
        "--mcp-threshold",
        "fail_ratio<0.001",
        "--mcp-threshold",
        "tools/call:counted p50<10s",
        "--mcp-threshold",
        "tools/call:counted rps>1",
    )
    assert proc.returncode == 0, run.output[-4000:]
    assert "pass  tools/call:counted p50<10s" in proc.stdout
    results = run.histograms()["thresholds"]
    assert [r["passed"] for r in results] == [True, True, True]
    assert results[2]["measured"] > 1
    proc, run = locust(tmp_path, base[1], *common, "--mcp-threshold", "fail_ratio<0.001", "--mcp-threshold", "tools/call:counted p99<1us")
    assert proc.returncode == 1, run.output[-4000:]
    assert "FAIL  tools/call:counted p99<1us  (measured " in proc.stdout
    results = run.histograms()["thresholds"]
    assert [r["passed"] for r in results] == [True, False] and results[1]["measured"] >= 1


def test_malformed_threshold_stops_before_load(tmp_path: Path, counting: tuple[str, Path]) -> None:
    url, countfile = counting
    proc, _run = locust(
        tmp_path,
        os.path.join(LOADTESTS, "tools_call.py"),
        "-u",
        "1",
        "-t",
        "2s",
        "--host",
        url,
        "--mcp-tool",
        "counted",
        "--mcp-threshold",
        "tools/call:counted p99<5parsecs",
    )
    assert proc.returncode == 2
    assert "latency unit must be us, ms or s, got 'parsecs'" in proc.stderr
    assert countfile.stat().st_size == 0


BAD_SCENARIOS = {
    "unknown_op.toml": (
        '[[ops]]\nop = "tools/call"\ntool = "counted"\narguments = {text = "x"}\n\n[[ops]]\nop = "tools/delete"\n',
        "unknown_op.toml:7: unknown operation 'tools/delete'",
    ),
    "unlisted.toml": (
        '[[ops]]\nop = "tools/call"\ntool = "counted"\narguments = {text = "x"}\n\n[[ops]]\nop = "tools/call"\ntool = "missing"\n',
        "unlisted.toml:7: the server does not list tool 'missing'",
    ),
    "bad_args.json": (
        '{"ops": [\n  {"op": "tools/call", "tool": "counted", "arguments": {"text": "x"}},\n'
        '  {"op": "tools/call", "tool": "echo", "arguments": {"text": 3}}\n]}\n',
        "bad_args.json:3: arguments of 'echo' fail its inputSchema: text: 3 is not of type 'string'",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD_SCENARIOS))
def test_bad_scenario_is_refused_before_any_load(tmp_path: Path, counting: tuple[str, Path], name: str) -> None:
    url, countfile = counting
    text, expected = BAD_SCENARIOS[name]
    path = tmp_path / name
    path.write_text(text)
    proc, _run = locust(tmp_path, SCENARIO, "-u", "2", "-r", "2", "-t", "3s", "--host", url, "--mcp-scenario", str(path))
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert expected in proc.stderr, proc.stderr[-3000:]
    assert countfile.stat().st_size == 0  # the server answered no tools/call: nothing was sent


SCENARIO_TOML = """\
[[users]]
name = "caller"
weight = 3

[[users.ops]]
op = "tools/call"
tool = "counted"
arguments = {text = "x"}
weight = 5

[[users.ops]]
op = "tools/call"
tool = "add"
generate = true

[[users.ops]]
op = "stream"
tool = "stream"
arguments = {n = 3}

[[users]]
name = "reader"

[[users.ops]]
op = "resources/read"
template = "demo://greeting/{name}"
vars = {name = "ada"}

[[users.ops]]
op = "prompts/get"
prompt = "summarise"
arguments = {text = "a long text"}

[[users.ops]]
op = "completion/complete"
prompt = "summarise"
argument = "style"
value = "b"

[[users.ops]]
op = "resources/templates/list"
"""


@pytest.mark.parametrize("engine", ENGINES)
def test_scenario_file_runs_every_operation_kind(tmp_path: Path, counting: tuple[str, Path], engine: str) -> None:
    url, countfile = counting
    path = tmp_path / "mix.toml"
    path.write_text(SCENARIO_TOML)
    proc, run = locust(
        tmp_path, SCENARIO, "-u", "4", "-r", "4", "-t", "3s", "--host", url, "--mcp-scenario", str(path), "--mcp-engine", engine
    )
    assert proc.returncode == 0, run.output[-4000:]
    ok, failed = counts(run)
    assert failed == {}, failed
    for name in (
        "tools/call:counted",
        "tools/call:add",
        "tools/call:stream",
        "progress:first-event",
        "resources/read",
        "prompts/get:summarise",
        "completion/complete",
        "resources/templates/list",
    ):
        assert ok.get(name, 0) > 0, (name, ok)
    assert ok["progress:gap"] == 2 * ok["tools/call:stream"]
    assert countfile.stat().st_size == ok["tools/call:counted"]  # the server's own count agrees


# -- hold -----------------------------------------------------------------------------------------------------
def test_hold_streams_and_fanout(tmp_path: Path) -> None:
    port = free_port()
    broadcast = [sys.executable, os.path.join(LOADTESTS, "_broadcast_server.py"), "--transport", "http", "--host", "127.0.0.1"]
    server = start_process([*broadcast, "--port", str(port)], port, "broadcast server", env=child_env())
    try:
        proc, run = locust(
            tmp_path,
            os.path.join(LOADTESTS, "hold.py"),
            "-u",
            "3",
            "-r",
            "3",
            "-t",
            "6s",
            "--host",
            f"http://127.0.0.1:{port}/mcp",
            "--mcp-engine",
            "python",
            "--mcp-hold-per-user",
            "10",
            "--mcp-hold-trigger",
            "broadcast",
            "--mcp-hold-trigger-every",
            "1",
            "--mcp-server-pid",
            str(server.pid),
        )
    finally:
        stop(server)
    assert proc.returncode == 0, run.output[-4000:]
    hold = json.loads(Path(f"{run.prefix}_hold.json").read_text())
    assert hold["streams_held"] == 30 and hold["streams_failed"] == 0
    assert hold["server_rss_kib_per_stream"] is not None
    ok, failed = counts(run)
    assert failed == {}, failed
    assert ok["GET:open"] == 30
    triggers = len(hold["fanout_all_us"])
    assert triggers >= 1
    # every trigger reached every held stream once (a trigger still in flight at the stop may add a partial round)
    assert 30 * triggers <= ok["hold:fanout"] <= 30 * hold["triggers"]
    assert ok["hold:fanout-all"] == triggers


def scrape(port: int) -> str:
    """The Prometheus text of the server on ``port``."""
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        return str(resp.read().decode())


BROADCAST = (sys.executable, os.path.join(LOADTESTS, "_broadcast_server.py"))
SERVE = (sys.executable, "-m", "mcpfast", "serve")


def served_run(tmp_path: Path, server: tuple[str, ...], locustfile: str, *args: str) -> tuple[subprocess.CompletedProcess, Run, str]:
    """``loadtests/<locustfile>`` against ``server`` (argv before ``--transport http``) with
    ``/metrics`` (``{pid}`` in ``args``: the server's pid); the run and the server's Prometheus text
    after it."""
    port = free_port()
    cmd = [*server, "--transport", "http", "--metrics", "--host", "127.0.0.1", "--port", str(port)]
    proc_server = start_process(cmd, port, "server", env=child_env())
    try:
        args = tuple(a.replace("{pid}", str(proc_server.pid)) for a in args)
        proc, run = locust(tmp_path, os.path.join(LOADTESTS, locustfile), "--host", f"http://127.0.0.1:{port}/mcp", *args)
        text = scrape(port)
    finally:
        stop(proc_server)
    return proc, run, text


@pytest.mark.skipif(not native_available(), reason="the native engine needs the compiled core")
def test_hold_on_the_native_engine_counts_as_the_server_does(tmp_path: Path) -> None:
    from _support import metric

    proc, run, text = served_run(
        tmp_path,
        BROADCAST,
        "hold.py",
        *("-u", "3", "-r", "3", "-t", "5s", "--mcp-hold-per-user", "10", "--mcp-server-pid", "{pid}"),
        *("--mcp-hold-trigger", "broadcast", "--mcp-hold-trigger-every", "1"),
    )
    assert proc.returncode == 0, run.output[-4000:]
    assert "native engine started: family hold" in run.output
    hold = json.loads(Path(f"{run.prefix}_hold.json").read_text())
    assert hold["streams_held"] == hold["streams_opened"] == 30 and hold["streams_failed"] == 0
    assert hold["server_rss_kib_held"] is not None
    ok, failed = counts(run)
    assert failed == {}, failed

    def served(method: str, status: str) -> int:
        return int(metric(text, "mcpfast_http_requests_total", method=method, status=status))

    # the server's counts, method by method: the listeners' sessions, the trigger's, and the one
    # session of the trigger check (initialize, initialized, tools/list), which reports nothing
    assert ok["initialize"] + 1 == served("initialize", "200") == 32
    assert ok["notifications/initialized"] + 1 == served("notifications/initialized", "202")
    assert served("tools/list", "200") == 1
    assert ok["GET:open"] == served("GET", "200") == 30
    assert ok["tools/call:broadcast"] == served("tools/call", "200") == hold["triggers"] >= 1
    rounds = len(hold["fanout_all_us"])
    assert rounds >= 1 and ok["hold:fanout-all"] == rounds
    assert 30 * rounds <= ok["hold:fanout"] <= 30 * hold["triggers"]


@pytest.mark.parametrize("engine", ENGINES)
def test_hold_refuses_a_trigger_the_server_does_not_list(tmp_path: Path, engine: str) -> None:
    proc, run, text = served_run(
        tmp_path,
        BROADCAST,
        "hold.py",
        *("-u", "2", "-r", "2", "-t", "5s", "--mcp-engine", engine, "--mcp-hold-per-user", "3", "--mcp-hold-trigger", "no_such_tool"),
    )
    assert proc.returncode == 2, run.output[-4000:]
    assert "--mcp-hold-trigger 'no_such_tool': the server does not list that tool (tools/list: add, broadcast, echo, stream)" in run.output
    # no load: the check's one session and its tools/list, nothing else
    assert 'method="GET"' not in text and 'method="tools/call"' not in text, text


# -- discover ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("engine", ENGINES)
def test_discover_family_against_the_handshake(tmp_path: Path, counting: tuple[str, Path], engine: str) -> None:
    url, countfile = counting
    proc, run = locust(
        tmp_path,
        os.path.join(LOADTESTS, "discover.py"),
        "-u",
        "2",
        "-r",
        "2",
        "-t",
        "3s",
        "--host",
        url,
        "--mcp-engine",
        engine,
        "--mcp-tool",
        "counted",
        "--mcp-tool-args",
        '{"text": "x"}',
    )
    assert proc.returncode == 0, run.output[-4000:]
    ok, failed = counts(run)
    assert failed == {}, failed
    d, i = ok["start:discover"], ok["start:initialize"]
    assert d > 0 and i > 0 and abs(d - i) <= 2  # each user alternates the two starts
    assert ok["server/discover"] == ok["tools/call:counted (first after discover)"] == d
    assert ok["initialize"] == ok["notifications/initialized"] == ok["tools/call:counted (first after initialize)"] == i
    assert ok["DELETE"] <= i
    assert countfile.stat().st_size == d + i  # the server answered exactly the first calls the swarm counted


# -- tasks ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("engine", ENGINES)
def test_tasks_family_polls_to_completion_and_cancels(tmp_path: Path, engine: str) -> None:
    from _support import metric

    proc, run, text = served_run(
        tmp_path,
        (*SERVE, "--app", "mcpfast.server.conformance:app"),
        "tasks.py",
        *("-u", "4", "-r", "4", "-t", "5s", "--mcp-engine", engine),
        *("--mcp-tool", "slow_compute", "--mcp-tool-args", '{"seconds": 1.0}', "--mcp-tasks-cancel-share", "0.5"),
    )
    assert proc.returncode == 0, run.output[-4000:]
    ok, failed = counts(run)
    assert failed == {}, failed
    tasks = json.loads(Path(f"{run.prefix}_tasks.json").read_text())
    assert tasks["made"] == ok["tools/call:slow_compute"] and tasks["failed"] == 0 and tasks["not_a_task"] == 0
    assert tasks["completed"] == ok.get("task:completed", 0) > 0
    assert tasks["cancelled"] == ok.get("task:cancelled", 0) > 0
    assert tasks["polls"] == ok["tasks/get"] and tasks["cancels_sent"] == ok["tasks/cancel"]
    # the server's own counts, method by method: the check before load sent, unreported, one
    # server/discover, tools/list and tools/call of the tool (a task, cancelled at once)
    probe = {"tools/call": 1, "tasks/get": 0, "tasks/cancel": 1}
    for method, name in (("tools/call", "tools/call:slow_compute"), ("tasks/get", "tasks/get"), ("tasks/cancel", "tasks/cancel")):
        assert metric(text, "mcpfast_http_requests_total", method=method, status="200") == ok[name] + probe[method], method


@pytest.mark.parametrize("engine", ENGINES)
def test_tasks_refuses_a_server_without_the_tasks_extension(tmp_path: Path, engine: str) -> None:
    proc, run, text = served_run(tmp_path, SERVE, "tasks.py", "-u", "2", "-r", "2", "-t", "5s", "--mcp-engine", engine)
    assert proc.returncode == 2, run.output[-4000:]
    assert "the server does not offer the tasks extension (io.modelcontextprotocol/tasks" in run.output
    assert 'method="tools/call"' not in text, text  # no load: the check's server/discover only


@pytest.mark.skipif(not native_available(), reason="the native engine needs the compiled core")
def test_scenario_on_the_native_engine_counts_as_the_server_does(tmp_path: Path) -> None:
    from _support import metric

    path = tmp_path / "mix.toml"
    path.write_text(SCENARIO_TOML.replace('tool = "counted"', 'tool = "echo"'))  # the demo app's tools
    proc, run, text = served_run(tmp_path, SERVE, "scenario.py", "-u", "4", "-r", "4", "-t", "3s", "--mcp-scenario", str(path))
    assert proc.returncode == 0, run.output[-4000:]
    assert "native engine started" in run.output
    ok, failed = counts(run)
    assert failed == {}, failed

    def served(method: str, status: str = "200") -> int:
        return int(metric(text, "mcpfast_http_requests_total", method=method, status=status))

    # every request the swarm reported is one the server counted, method by method, besides the
    # one session of the check before load (fetch_server_info: its handshake and the lists), which
    # reports nothing
    calls = ok["tools/call:echo"] + ok["tools/call:add"] + ok["tools/call:stream"]
    assert calls > 0 and served("tools/call") == calls
    for method, name, check in (
        ("resources/read", "resources/read", 0),
        ("prompts/get", "prompts/get:summarise", 0),
        ("completion/complete", "completion/complete", 0),
        ("resources/templates/list", "resources/templates/list", 1),
        ("initialize", "initialize", 1),
    ):
        assert served(method) == ok[name] + check and ok[name] > 0, (method, ok)
    assert served("notifications/initialized", "202") == ok["notifications/initialized"] + 1
    assert served("tools/list") == served("resources/list") == served("prompts/list") == 1
