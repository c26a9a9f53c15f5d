"""Shared pytest configuration for the whole suite (keep it generic; area fixtures live below)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from _support import RedisServer


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
