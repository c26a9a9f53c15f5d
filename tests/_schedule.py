"""The order the suite runs in: test modules longest first, each module's tests together.

`make test` hands whole modules to its workers (pytest-xdist's ``loadscope``, in collection
order), so putting the longest modules first is the longest-processing-time-first rule: the
short ones fill the gaps at the end and no worker starts a long module while the others finish.
Whole modules also set up a module's fixtures (servers, a quick run) once rather than once per
worker that got some of its tests.

The seconds come from ``module_seconds.json`` beside this file, measured by the suite itself:
``make test-python PYTEST_ARGS=--record-module-seconds`` adds up each module's setup, call and
teardown times on the controller and merges them into the file. A module missing from it runs
after the measured ones; a stale figure only costs time, never a result.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import pytest

SECONDS_FILE = Path(__file__).with_name("module_seconds.json")


def module_of(nodeid: str) -> str:
    """The test module a node id belongs to (``tests/x/test_y.py`` of ``tests/x/test_y.py::t[a]``)."""
    return nodeid.split("::", 1)[0]


def load_seconds(path: Path = SECONDS_FILE) -> dict[str, float]:
    """The measured seconds per module; none when the file does not exist yet."""
    if not path.exists():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not all(isinstance(v, (int, float)) for v in data.values()):
        raise ValueError(f"{path}: expected an object of module path to seconds")
    return {str(k): float(v) for k, v in data.items()}


def longest_modules_first(items: Sequence[pytest.Item], seconds: dict[str, float]) -> list[pytest.Item]:
    """``items`` with the modules in descending measured seconds (unmeasured last, ties in
    collection order) and each module's items together and in their own order."""
    first_seen: dict[str, int] = {}
    for position, item in enumerate(items):
        first_seen.setdefault(module_of(item.nodeid), position)

    def key(item: pytest.Item) -> tuple[float, int]:
        module = module_of(item.nodeid)
        return (-seconds.get(module, 0.0), first_seen[module])

    return sorted(items, key=key)


class ModuleSeconds:
    """Adds up every report's duration by module and merges the totals into the seconds file at
    the end of the session (registered on the controller only: it sees the workers' reports)."""

    def __init__(self, path: Path = SECONDS_FILE) -> None:
        self.path = path
        self.totals: defaultdict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.totals[module_of(report.nodeid)] += report.duration

    def pytest_sessionfinish(self) -> None:
        if not self.totals:
            return
        merged = load_seconds(self.path)
        merged.update({module: round(total, 1) for module, total in self.totals.items()})
        ordered = dict(sorted(merged.items(), key=lambda kv: (-kv[1], kv[0])))
        self.path.write_text(json.dumps(ordered, indent=1) + "\n", encoding="utf-8")
