"""Helpers of the agents' tests (a uniquely named plain module: test directories have no
``__init__.py``): the test apps' servers, headless runs of ``loadtests/agents.py`` and what they
wrote."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _support import REPO_ROOT, child_env, free_port, start_process, stop

HERE = Path(__file__).resolve().parent
AGENTS = str(REPO_ROOT / "loadtests" / "agents.py")


def apps_env() -> dict[str, str]:
    """A child's environment with this folder's apps importable (``apps:items``)."""
    return child_env(PYTHONPATH=os.pathsep.join([str(HERE), str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]))


@contextmanager
def items_server(*serve_args: str) -> Iterator[str]:
    """``mcpfast serve --app apps:items`` over HTTP (killed after 90 s at the latest); yields its
    endpoint URL."""
    port = free_port()
    serve = [sys.executable, "-m", "mcpfast", "serve", "--transport", "http", "--host", "127.0.0.1", "--port", str(port)]
    cmd = ["timeout", "90", *serve, "--app", "apps:items", *serve_args]
    proc = start_process(cmd, port, "the items server", env=apps_env())
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop(proc)


class Run:
    """A finished ``locust -f loadtests/agents.py`` run: its exit code, output and files."""

    def __init__(self, prefix: Path, proc: subprocess.CompletedProcess[str]) -> None:
        self.prefix = prefix
        self.code = proc.returncode
        self.output = proc.stdout + proc.stderr

    def histograms(self) -> dict[str, Any]:
        return dict(json.loads(Path(f"{self.prefix}_histograms.json").read_text()))

    def ok(self) -> dict[str, int]:
        return {h["name"]: h["n"] for h in self.histograms()["histograms"]}

    def failed(self) -> dict[str, int]:
        return {h["name"]: h["n"] for h in self.histograms()["failed_histograms"]}

    def failures(self) -> dict[tuple[str, str], int]:
        """``{(name, reason): occurrences}`` of Locust's failures CSV."""
        with open(f"{self.prefix}_failures.csv", newline="") as fh:
            return {(r["Name"], r["Error"]): int(r["Occurrences"]) for r in csv.DictReader(fh)}


def run_agents(tmp: Path, *args: str, timeout: float = 60.0) -> Run:
    """A headless run of ``loadtests/agents.py`` with these arguments (its CSVs and histograms at
    a prefix in ``tmp``)."""
    prefix = tmp / f"run{len(list(tmp.glob('run*')))}"
    cmd = [sys.executable, "-m", "locust", "-f", AGENTS, "--headless", "--only-summary", "--csv", str(prefix), "--stop-timeout", "3", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=child_env(), cwd=tmp)
    return Run(prefix, proc)


def workload(tmp: Path, text: str, name: str = "agent.toml") -> str:
    path = tmp / name
    path.write_text(text)
    return str(path)
