"""``core_doorway.py`` (checked by mypy in ``make lint``) covers every public name of mcpfast.core."""

from __future__ import annotations

import ast
from pathlib import Path

import mcpfast.core

CHECK = Path(__file__).with_name("core_doorway.py")


def asserted_names() -> set[str]:
    """The ``core.NAME`` expressions that are, or are called in, the first argument of an ``assert_type``."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(CHECK.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "assert_type":
            checked = node.args[0]
            if isinstance(checked, ast.Call):
                checked = checked.func
            if isinstance(checked, ast.Attribute) and isinstance(checked.value, ast.Name) and checked.value.id == "core":
                names.add(checked.attr)
    return names


def test_every_public_name_of_the_core_is_type_checked() -> None:
    assert asserted_names() == set(mcpfast.core.__all__)
