"""Where the swarm's locustfiles live: inside the package, so a ``pip install`` has them.

The repository's top-level ``loadtests/`` is a link to the same folder, so ``locust -f
loadtests/`` in a checkout and ``locust -f "$(mcpfast locustfiles)"`` after ``pip install`` run
the same files. This module imports nothing heavy: the CLI asks it without the swarm extra.
"""

from __future__ import annotations

from pathlib import Path

LOCUSTFILES: Path = Path(__file__).resolve().parents[1] / "loadtests"


def families() -> list[str]:
    """The locustfiles a user can pass to ``locust -f``: every ``*.py`` that is not a helper."""
    return sorted(p.stem for p in LOCUSTFILES.glob("*.py") if not p.name.startswith("_"))
