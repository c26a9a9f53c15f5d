"""Public names: mcpfast.core's __all__, the twin and the typed contract _core.pyi agree."""

from __future__ import annotations

import ast
from pathlib import Path

import mcpfast.core
from mcpfast.core import _python

PYI = Path(mcpfast.core.__file__).resolve().parents[1] / "_core.pyi"
# In the compiled core only (the pure-Python twin has no load engine and no HTTP lane): mcpfast.core
# exposes them as None with MCPFAST_CORE=python, and HAS_NATIVE_ENGINE and HAS_LANE say which.
COMPILED_ONLY = {"DrainRow", "EngineConfig", "HttpLane", "MixItem", "NativeEngine"}


def isort_key(name: str) -> tuple[int, str]:
    """Sorting of __all__ as isort/ruff (RUF022) do it: CONSTANTS, then Classes, then functions."""
    if name.isupper():
        return (0, name)
    if name[:1].isupper():
        return (1, name)
    return (2, name)


def pyi_all() -> list[str]:
    tree = ast.parse(PYI.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            value = ast.literal_eval(node.value)
            assert isinstance(value, list)
            return value
    raise AssertionError("_core.pyi has no __all__")


def pyi_defined_names() -> set[str]:
    tree = ast.parse(PYI.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.ImportFrom):
            names.update(alias.asname or alias.name for alias in node.names)
    return names


def test_core_all_is_sorted_and_complete() -> None:
    names = mcpfast.core.__all__
    assert names == sorted(names, key=isort_key)
    assert len(set(names)) == len(names)
    for name in names:
        assert hasattr(mcpfast.core, name), name


def test_twin_matches_pyi() -> None:
    expected = pyi_all()
    assert expected == sorted(expected, key=isort_key)
    assert sorted(_python.__all__) == sorted(set(expected) - COMPILED_ONLY)
    for name in set(expected) - COMPILED_ONLY:
        assert hasattr(_python, name), name
    for name in COMPILED_ONLY:
        assert not hasattr(_python, name), name
        assert (getattr(mcpfast.core, name) is None) == (mcpfast.core.IMPLEMENTATION == "python"), name
    assert _python.__version__ == mcpfast.core.__version__


def test_pyi_all_names_are_declared() -> None:
    declared = pyi_defined_names()
    for name in pyi_all():
        assert name in declared, name
    assert "__version__" in declared


def test_pyi_classes_members_exist_in_twin() -> None:
    tree = ast.parse(PYI.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            cls = getattr(mcpfast.core, node.name) if node.name in COMPILED_ONLY else getattr(_python, node.name)
            if cls is None:  # the twin: no native engine
                continue
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    assert hasattr(cls, item.name), f"{node.name}.{item.name}"


def test_doorway_reexports_the_core_api() -> None:
    core_api = set(pyi_all()) - {"build_profile"}
    assert core_api <= set(mcpfast.core.__all__)
