"""Fixtures for the core suite: every test runs against both implementations.

``core`` is parametrised over ``"rust"`` and ``"python"``. When the compiled core cannot be
imported the ``rust`` case FAILS, unless ``MCPFAST_ALLOW_NO_RUST=1`` is set (then it skips).
"""

from __future__ import annotations

from types import ModuleType

import pytest

from mcpfast.core import load

IMPLEMENTATIONS = ["rust", "python"]


@pytest.fixture(params=IMPLEMENTATIONS)
def core(request: pytest.FixtureRequest, allow_no_rust: bool) -> ModuleType:
    name = request.param
    try:
        return load(name)
    except ImportError as exc:
        if name == "rust" and allow_no_rust:
            pytest.skip("compiled core not importable (MCPFAST_ALLOW_NO_RUST=1)")
        pytest.fail(f"cannot load the {name} core: {exc} (MCPFAST_ALLOW_NO_RUST=1 skips instead)")
