"""The locustfiles as Locust loads them: from the repository's ``loadtests/`` and from the folder
``mcpfast locustfiles`` names, whatever the working directory; one copy of their shared setup,
imported by its package name; and thin: a locustfile holds its user classes and their tasks, and
imports the rest from ``mcpfast.locust``."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from _loadtest_support import LOADTESTS, REPO_ROOT, child_env

from mcpfast.locust.locustfiles import LOCUSTFILES, families

USERS = [
    "AgentUser",
    "DiscoverUser",
    "HandshakeUser",
    "HoldUser",
    "MixedUser",
    "ScenarioUser",
    "SessionChurnUser",
    "SseStreamingUser",
    "TasksUser",
    "ToolsCallUser",
]


def _installed_folder() -> str:
    mcpfast = Path(sys.executable).with_name("mcpfast")
    out = subprocess.run([str(mcpfast), "locustfiles"], capture_output=True, text=True, timeout=60, env=child_env())
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.mark.parametrize("where", ["repo root", "elsewhere"])
@pytest.mark.parametrize("folder", ["loadtests", "mcpfast locustfiles"])
def test_locust_loads_every_family_from_either_folder_and_any_cwd(where: str, folder: str, tmp_path: Path) -> None:
    path = LOADTESTS if folder == "loadtests" else _installed_folder()
    if folder == "loadtests" and where == "repo root":
        path = "loadtests/"  # as the README has it
    cwd = REPO_ROOT if where == "repo root" else tmp_path
    proc = subprocess.run(
        [sys.executable, "-m", "locust", "-f", path, "--list"], capture_output=True, text=True, timeout=60, env=child_env(), cwd=cwd
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    listed = [line.strip() for line in proc.stdout.splitlines() if line.startswith("    ")]
    assert sorted(listed) == USERS, proc.stdout


LOAD_ALL = r"""
import json, os, sys
import locust
from locust.argument_parser import parse_locustfile_paths
from locust.util.load_locustfile import load_locustfile

for path in parse_locustfile_paths([sys.argv[1]]):
    load_locustfile(path)
common = os.path.realpath(os.path.join(sys.argv[1], "_common.py"))
print(json.dumps(sorted(m for m, mod in list(sys.modules.items()) if os.path.realpath(getattr(mod, "__file__", None) or "") == common)))
"""


def test_the_shared_setup_is_one_module_imported_by_its_package_name(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", LOAD_ALL, LOADTESTS], capture_output=True, text=True, timeout=60, env=child_env(), cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == ["mcpfast.loadtests._common"]


def _module_level(path: Path) -> list[str]:
    """What a locustfile does at module level besides importing, naming constants, defining user
    classes (methods only) and calling its family's setup."""
    tree = ast.parse(path.read_text())
    found = []
    for node in tree.body[1:] if ast.get_docstring(tree) else tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            continue
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            continue  # a name for a literal (discover.py's era)
        if isinstance(node, ast.ClassDef) and not node.decorator_list:
            others = [type(n).__name__ for n in node.body if not isinstance(n, ast.FunctionDef | ast.Assign | ast.AnnAssign | ast.Expr)]
            found += [f"{node.name}: {o}" for o in others]
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            func = node.value.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if name in ("register", "named_only"):
                continue
        found.append(f"line {node.lineno}: {type(node).__name__}")
    return found


@pytest.mark.parametrize("family", families())
def test_a_locustfile_holds_its_users_and_imports_the_rest(family: str) -> None:
    path = LOCUSTFILES / f"{family}.py"
    assert _module_level(path) == []
    assert len(path.read_text().splitlines()) <= 80, "a family's logic belongs in mcpfast.locust"
