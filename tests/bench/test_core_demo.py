"""`make demo`'s table: both implementations agree on every operation, and every row prints."""

from __future__ import annotations

import pytest

from mcpfast.bench import core_demo
from mcpfast.core import load


def test_the_two_implementations_agree_on_every_demo_operation() -> None:
    rust, python = core_demo.operations(load("rust")), core_demo.operations(load("python"))
    assert rust.keys() == python.keys()
    for name in rust:
        assert rust[name]() == python[name](), name


def test_demo_prints_a_row_per_operation(capsys: pytest.CaptureFixture[str]) -> None:
    assert core_demo.main(["--budget", "0.001"]) == 0
    out = capsys.readouterr().out
    for name in core_demo.operations(load("python")):
        row = next(line for line in out.splitlines() if line.startswith(name))
        assert row.rstrip().endswith("x")
