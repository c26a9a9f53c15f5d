"""Shared pytest configuration for the whole suite (keep it generic; area fixtures live below)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from _schedule import ModuleSeconds, load_seconds, longest_modules_first
from _support import RedisServer


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--record-module-seconds",
        action="store_true",
        help="merge each test module's measured seconds into tests/module_seconds.json (the suite's order)",
    )


def pytest_configure(config: pytest.Config) -> None:
    # Only the controller (or a run without workers) records: it sees every worker's reports.
    if config.getoption("record_module_seconds") and not hasattr(config, "workerinput"):
        config.pluginmanager.register(ModuleSeconds(), "mcpfast-module-seconds")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items[:] = longest_modules_first(items, load_seconds())


@pytest.fixture(scope="session")
def allow_no_rust() -> bool:
    """``MCPFAST_ALLOW_NO_RUST=1``: a missing compiled core skips (instead of fails) its tests."""
    return os.environ.get("MCPFAST_ALLOW_NO_RUST", "") == "1"


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A real ``redis-server`` on a free port, for the store and scale-out tests."""
    server = RedisServer(tmp_path)
    try:
        server.start()
    except RuntimeError as exc:
        pytest.fail(str(exc))
    try:
        yield server
    finally:
        server.stop()
