"""The wheel check's list of ``mcpfast/results/`` (``light_install.py``; ``make check-light`` runs it
on a real wheel), asserted on the source tree and on a wheel that breaks it."""

from __future__ import annotations

from pathlib import Path

import light_install

ROOT = Path(__file__).resolve().parents[2]


def _tree_files() -> dict[str, bytes]:
    return {f"mcpfast/results/{p.name}": p.read_bytes() for p in (ROOT / "mcpfast" / "results").glob("*.py")}


def test_the_source_tree_holds_the_product_results_only() -> None:
    assert light_install.results_problems(_tree_files()) == []


def test_the_bench_is_under_its_line_cap() -> None:
    lines = sum(p.read_bytes().count(b"\n") for p in (ROOT / "mcpfast" / "bench").glob("*.py"))
    assert lines < light_install.BENCH_MAX_LINES == 2500


def test_a_results_module_too_many_or_from_the_lab_is_refused() -> None:
    files = _tree_files()
    del files["mcpfast/results/noise.py"]
    files["mcpfast/results/peers.py"] = b"from benchmarks.harness import pinned\n"
    problems = light_install.results_problems(files)
    assert problems[0] == "mcpfast/results/ is not the product's modules (extra ['peers.py'], missing ['noise.py'])"
    assert problems[1] == "mcpfast/results/peers.py holds 'from benchmarks'"
