"""The README's layout block is drawn from the tree: every crate under ``rust/`` and every package
under ``mcpfast/`` (a folder with ``__init__.py``) has an entry, every path the block names
exists, and each crate's entry names exactly the crates of ours its ``Cargo.toml`` depends on (the
``mcpfast-*`` names in an entry, but its own, are what it is built on)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CRATE = re.compile(r"\bmcpfast-[a-z]+\b")


def layout_block(readme: str) -> list[str]:
    """The lines of the first fenced block after the ``## Layout`` heading."""
    section = readme.split("\n## Layout\n", 1)[1]
    return section.split("```\n", 2)[1].splitlines()


def entries(block: list[str]) -> dict[str, str]:
    """``{path: its text}``: an entry starts at column 0 with its path; indented lines continue it."""
    out: dict[str, str] = {}
    path = ""
    for line in block:
        if line and not line[0].isspace():
            path, _, text = line.partition(" ")
            out[path] = text.strip()
        elif path:
            out[path] += " " + line.strip()
    return out


def named_paths(block: list[str], root: Path) -> set[str]:
    """Every word of the block that is a path under one of the repository's top-level entries."""
    tops = {p.name for p in root.iterdir()}
    words = {w.strip("`,;:()") for line in block for w in line.split()}
    return {w for w in words if "/" in w and w.split("/", 1)[0] in tops}


def problems(readme: str, root: Path) -> list[str]:
    """What the layout block gets wrong about the tree at ``root`` (``[]``: nothing)."""
    block = layout_block(readme)
    listed = entries(block)
    crates = {p.parent for p in (root / "rust").glob("*/Cargo.toml")}
    packages = {p.parent for p in (root / "mcpfast").rglob("*/__init__.py") if "__pycache__" not in p.parts}
    out = [f"{p.relative_to(root)}/ has no entry" for p in sorted(crates | packages) if f"{p.relative_to(root)}/" not in listed]
    out += [f"{path} does not exist" for path in sorted(named_paths(block, root) | set(listed)) if not (root / path).exists()]
    for crate in sorted(crates):
        text = listed.get(f"{crate.relative_to(root)}/")
        if text is None:
            continue
        deps = tomllib.loads((crate / "Cargo.toml").read_text(encoding="utf-8")).get("dependencies", {})
        built_on = {name for name, spec in deps.items() if isinstance(spec, dict) and "path" in spec}
        named = set(CRATE.findall(text)) - {crate.name}
        if named != built_on:
            out.append(f"{crate.name}'s entry names {sorted(named)}, its Cargo.toml depends on {sorted(built_on)}")
    return out


def test_the_readme_layout_is_the_tree() -> None:
    assert problems((ROOT / "README.md").read_text(encoding="utf-8"), ROOT) == []


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (lambda s: s.replace("rust/mcpfast-engine/ ", "rust/the-engine/ "), "rust/mcpfast-engine/ has no entry"),
        (lambda s: s.replace("mcpfast/store/ ", "mcpfast/stores/ "), "mcpfast/stores/ does not exist"),
        (lambda s: s.replace("mcpfast/adapters/ ", "mcpfast/adaptors/ "), "mcpfast/adapters/ has no entry"),
        (lambda s: s.replace("mcpfast/protocol/schemas/ ", "schemas/ "), "mcpfast/protocol/schemas/ has no entry"),
        (lambda s: s.replace("tests/core runs", "tests/kernel runs"), "tests/kernel does not exist"),
        (
            lambda s: s.replace("front on mcpfast-engine", "front on mcpfast-core"),
            "mcpfast-load's entry names ['mcpfast-core'], its Cargo.toml depends on ['mcpfast-engine']",
        ),
    ],
)
def test_a_layout_that_drifts_from_the_tree_is_caught(edit: object, problem: str) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    drifted = edit(readme)  # type: ignore[operator]
    assert drifted != readme
    assert problem in problems(drifted, ROOT)
