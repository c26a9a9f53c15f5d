"""The wheel check of ``light_install.py`` (``make check-light`` runs it on a real wheel): what
``mcpfast/bench/`` and ``benchmarks/`` may ship, asserted here on the source tree and on wheels
that break each rule."""

from __future__ import annotations

import tomllib
from pathlib import Path

import light_install

ROOT = Path(__file__).resolve().parents[2]


def _tree_files() -> dict[str, bytes]:
    return {f"mcpfast/bench/{p.name}": p.read_bytes() for p in (ROOT / "mcpfast" / "bench").glob("*.py")}


def test_the_source_tree_holds_the_product_bench_only() -> None:
    assert light_install.bench_problems(_tree_files()) == []


def test_only_the_package_is_packed() -> None:
    maturin = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["maturin"]
    assert maturin["python-packages"] == ["mcpfast"]
    assert not any("benchmarks" in str(entry) for entry in maturin.get("include", []))


def test_a_wheel_with_a_maintainer_tool_is_refused() -> None:
    files = _tree_files()
    files["benchmarks/harness.py"] = b"import os\n"
    files["mcpfast/bench/peers.py"] = b"from benchmarks.harness import pinned\n"
    problems = light_install.bench_problems(files)
    assert problems[0] == "ships the maintainer tool benchmarks/harness.py"
    assert "extra ['peers.py'], missing []" in problems[1]
    assert "mcpfast/bench/peers.py holds 'from benchmarks'" in problems


def test_a_bench_module_that_builds_or_grows_is_refused() -> None:
    files = _tree_files()
    del files["mcpfast/bench/traffic.py"]
    files["mcpfast/bench/run.py"] += b'subprocess.run(["cargo", "build"])\n' + b"#\n" * light_install.BENCH_MAX_LINES
    problems = light_install.bench_problems(files)
    assert "missing ['traffic.py']" in problems[0]
    assert problems[1].startswith("mcpfast/bench/ has ") and problems[2] == "mcpfast/bench/run.py holds '\"cargo\"'"
