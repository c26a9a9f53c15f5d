"""The tasks family before and under load: a tool the server will not run as a task is named before
any request of the load (exit 2, the reason said, nothing but the check's session reaching the
server), and a refusal under load is a failure named by its cause on both engines, not by its
status alone."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from _loadtest_support import LOADTESTS, REPO_ROOT, Run, child_env, locust_command, stop
from _support import free_port, metric, start_process

from mcpfast.locust.options import native_available

TASKS = os.path.join(LOADTESTS, "tasks.py")
ENGINES = ["native", "python"] if native_available() else ["python"]


def _served(*source: str) -> Iterator[str]:
    """``mcpfast serve SOURCE`` over HTTP with /metrics; its endpoint's URL."""
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "mcpfast",
        "serve",
        *source,
        "--transport",
        "http",
        "--metrics",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    proc = start_process(cmd, port, " ".join(source), env=child_env(), cwd=str(REPO_ROOT))
    yield f"http://127.0.0.1:{port}/mcp"
    stop(proc)


@pytest.fixture
def conformance() -> Iterator[str]:
    """The conformance fixture: slow_compute runs as a task, greet never."""
    yield from _served("--fixture", "conformance")


def _locust(tmp_path: Path, url: str, *args: str) -> Run:
    prefix = tmp_path / f"run{len(list(tmp_path.glob('run*')))}"
    cmd = locust_command(TASKS, prefix, "--host", url, "-u", "2", "-r", "2", "-t", "4s", *args)
    return Run(prefix, subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=REPO_ROOT, env=child_env()))


def _calls(url: str) -> int:
    import urllib.request

    with urllib.request.urlopen(url.removesuffix("/mcp") + "/metrics", timeout=5) as r:  # 127.0.0.1 only
        return int(metric(r.read().decode(), "mcpfast_http_requests_total", method="tools/call", status="200") or 0)


@pytest.mark.timeout(60)
def test_a_tool_the_server_will_not_run_as_a_task_is_named_before_any_load(tmp_path: Path, conformance: str) -> None:
    unknown = _locust(tmp_path, conformance)  # the default tool, echo, which the fixture has not
    assert unknown.proc.returncode == 2, unknown.output[-3000:]
    assert "mcpfast tasks: the server lists no tool 'echo' (its tools: " in unknown.output and "slow_compute" in unknown.output
    plain = _locust(tmp_path, conformance, "--mcp-tool", "greet", "--mcp-tool-args", '{"name": "x"}')
    assert plain.proc.returncode == 2, plain.output[-3000:]
    assert "the server ran 'greet' without making a task (resultType 'complete'): it will not run that tool as a task" in plain.output
    assert _calls(conformance) == 1  # the check's one call of greet: no load was sent
    refused = _locust(tmp_path, conformance, "--mcp-tool", "slow_compute", "--mcp-tool-args", '{"seconds": "soon"}')
    assert refused.proc.returncode == 2, refused.output[-3000:]
    assert "the server refused tools/call:slow_compute before any load: its result is an error: " in refused.output


@pytest.fixture
def limited() -> Iterator[str]:
    """A server keeping at most three tasks at once (finished ones until their 2 s TTL)."""
    yield from _served("--app", "tests.loadtests.tasks_app:app")


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.timeout(60)
def test_a_refusal_under_load_is_a_failure_named_by_its_cause(tmp_path: Path, limited: str, engine: str) -> None:
    run = _locust(tmp_path, limited, "--mcp-engine", engine, "--mcp-tool", "wait", "--mcp-tool-args", '{"seconds": 0.3}')
    assert run.proc.returncode == 1, run.output[-3000:]  # failures, not a refused start
    errors = [e for e in run.errors() if "tools/call:wait" in e]
    assert errors and all("too many tasks: the server keeps at most 3" in e for e in errors), run.errors()
