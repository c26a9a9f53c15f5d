"""The suite's order (tests/_schedule.py): longest measured modules first, modules kept whole."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest
from _schedule import ModuleSeconds, load_seconds, longest_modules_first


def _items(*nodeids: str) -> list[pytest.Item]:
    return [cast(pytest.Item, SimpleNamespace(nodeid=nodeid)) for nodeid in nodeids]


def test_modules_longest_first_each_whole_and_unmeasured_last() -> None:
    items = _items("a.py::t1", "b.py::t1", "a.py::t2", "c.py::t1", "b.py::t2[x]", "d.py::t1")
    ordered = longest_modules_first(items, {"a.py": 1.0, "b.py": 5.0, "c.py": 3.0})
    assert [item.nodeid for item in ordered] == ["b.py::t1", "b.py::t2[x]", "c.py::t1", "a.py::t1", "a.py::t2", "d.py::t1"]


def test_recorded_seconds_merge_into_the_file(tmp_path: Path) -> None:
    path = tmp_path / "seconds.json"
    path.write_text(json.dumps({"old.py": 9.0, "a.py": 100.0}))
    recorder = ModuleSeconds(path)
    for nodeid, duration in (("a.py::t1", 0.25), ("a.py::t1", 2.0), ("b.py::t[1]", 4.0)):
        recorder.pytest_runtest_logreport(cast(pytest.TestReport, SimpleNamespace(nodeid=nodeid, duration=duration)))
    recorder.pytest_sessionfinish()
    assert load_seconds(path) == {"b.py": 4.0, "a.py": 2.2, "old.py": 9.0}
    assert list(json.loads(path.read_text())) == ["old.py", "b.py", "a.py"]


def test_a_malformed_seconds_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "seconds.json"
    path.write_text(json.dumps({"a.py": "slow"}))
    with pytest.raises(ValueError, match="module path to seconds"):
        load_seconds(path)


def test_the_committed_seconds_name_modules_that_exist() -> None:
    root = Path(__file__).resolve().parents[1]
    missing = [module for module in load_seconds() if not (root / module).is_file()]
    assert not missing, f"tests/module_seconds.json names modules that no longer exist: {missing}"
