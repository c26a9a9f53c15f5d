"""Print the requirements of the package and the given extras, one per line, from pyproject.toml.

`make install` installs them with pip while maturin builds the Rust core beside it (the build
alone keeps the machine busy for about two minutes; the dependencies are mostly downloads), then
``maturin develop`` finds them all in place.

Usage: python tests/packaging/requirements.py EXTRA[,EXTRA...]
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def requirements(extras: list[str], pyproject: Path = PYPROJECT) -> list[str]:
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    optional: dict[str, list[str]] = project.get("optional-dependencies", {})
    unknown = [extra for extra in extras if extra not in optional]
    if unknown:
        raise SystemExit(f"{pyproject}: no extra named {', '.join(unknown)} (it has {', '.join(optional)})")
    own = project["name"].lower()
    found: list[str] = []
    for requirement in list(project.get("dependencies", [])) + [r for extra in extras for r in optional[extra]]:
        name = re.match(r"[A-Za-z0-9._-]+", requirement)
        # An extra that names the package itself (``mcpfast[swarm]``) is the other extras, listed already.
        if name is not None and name.group(0).lower().replace("_", "-") == own:
            continue
        if requirement not in found:
            found.append(requirement)
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    print("\n".join(requirements([extra for extra in argv[0].split(",") if extra])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
