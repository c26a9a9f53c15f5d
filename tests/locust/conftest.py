"""Fixtures for the swarm's measurement tests.

No warning filter is needed here: nothing in this process imports Locust.  ``import locust``
gevent-monkey-patches the whole interpreter (and, this late, warns that ``ssl`` was imported
first), which would leak into every other test area of the suite; so the tests that need a real
Locust runner run it in a child interpreter (``_scenarios.py`` or the ``locust`` CLI) and only
read its results.  The modules tested in-process (histogram, pacing, validate, options) do not
import Locust.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from _support import child_env as _child_env

import mcpfast

REPO_ROOT = Path(mcpfast.__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent


@pytest.fixture
def child_env() -> Callable[..., dict[str, str]]:
    """Environment for a child interpreter that imports this checkout's ``mcpfast``."""
    return _child_env


@pytest.fixture
def run_scenario(tmp_path: Path) -> Callable[[str], dict]:
    """Run one scenario of ``_scenarios.py`` in a child interpreter; return its JSON summary."""

    def run(name: str, timeout: float = 90.0) -> dict:
        proc = subprocess.run(
            [sys.executable, str(HERE / "_scenarios.py"), name, str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=_child_env(),
            cwd=tmp_path,
        )
        assert proc.returncode == 0, proc.stderr[-4000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])

    return run
