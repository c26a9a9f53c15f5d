"""Shared pytest configuration for the whole suite (keep it generic; area fixtures live below)."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def allow_no_rust() -> bool:
    """``MCPFAST_ALLOW_NO_RUST=1``: a missing compiled core skips (instead of fails) its tests."""
    return os.environ.get("MCPFAST_ALLOW_NO_RUST", "") == "1"
