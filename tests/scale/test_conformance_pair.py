"""The official conformance suite against two processes sharing a Redis, behind a round-robin proxy.

Every request the suite sends goes to the other process than the one before (``benchmarks/rr_proxy.py``
prints the backend of each request; the test checks the alternation and that both served).
"""

from __future__ import annotations

import importlib.util
import itertools
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from _support import free_port, wait_port_named

PROXY = Path(__file__).resolve().parents[2] / "benchmarks" / "rr_proxy.py"  # the round-robin proxy the scale benchmark runs too

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]

_spec = importlib.util.spec_from_file_location("_conformance", Path(__file__).parents[1] / "conformance" / "test_conformance.py")
assert _spec is not None and _spec.loader is not None
conformance = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(conformance)


@pytest.fixture
def proxied(servers, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    a, b = servers(2)
    port = free_port()
    log = tmp_path / "proxy.log"
    with log.open("wb") as out:
        proxy = subprocess.Popen(
            [sys.executable, str(PROXY), str(port), str(a.port), str(b.port)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_port_named(port, proxy, "rr_proxy")
        yield f"http://127.0.0.1:{port}/mcp", log
    finally:
        proxy.terminate()
        proxy.wait(10)


def _alternates(log: Path) -> int:
    backends = [line.split()[0] for line in log.read_text().splitlines() if line and line[0].isdigit()]
    assert all(x != y for x, y in itertools.pairwise(backends))
    assert min(backends.count("0"), backends.count("1")) >= len(backends) // 2  # both served half
    return len(backends)


def test_stable_suite_through_the_pair(proxied: tuple[str, Path]) -> None:
    url, log = proxied
    done = conformance._run(conformance._suite("stable"), url)
    output = done.stdout + done.stderr
    failing = [line for line in output.splitlines() if line.startswith("✗")]
    total = conformance.re.search(r"Total: (\d+) passed, (\d+) failed", output)
    assert total is not None, output[-4000:]
    assert int(total.group(2)) == 0 and done.returncode == 0, "\n".join(failing) or output[-4000:]
    assert int(total.group(1)) >= 40
    assert _alternates(log) > 100


PER_PROCESS_APP_STATE = {"server-stateless"}
"""Scenarios that may fail through the pair for a reason outside the store: ``server-stateless``
opens a ``subscriptions/listen`` stream and then calls ``test_trigger_tool_change``, which the
proxy sends to the other process; the fixture's tool list (and so its list-changed
notification) is that process's own application state, so the listener on the first process
may hear nothing. The single-process run (tests/conformance) checks the scenario fully."""


def test_prerelease_suite_through_the_pair(proxied: tuple[str, Path]) -> None:
    url, log = proxied
    done = conformance._run(conformance._suite("next"), url, "--expected-failures", str(conformance.EXPECTED_2026))
    output = done.stdout + done.stderr
    assert "Total:" in output, output[-4000:]
    summary = output[output.find("=== SUMMARY ===") :]
    unexpected = set()
    if "Unexpected failures" in summary:
        block = summary.split("Unexpected failures", 1)[1].split("\n\n", 1)[0]
        unexpected = {line.split("✗", 1)[1].strip() for line in block.splitlines() if "✗" in line}
    assert unexpected <= PER_PROCESS_APP_STATE, summary[-6000:]
    assert done.returncode == 0 or unexpected, summary[-6000:]
    assert "Stale" not in summary and "stale" not in summary, summary[-6000:]
    assert _alternates(log) > 100
