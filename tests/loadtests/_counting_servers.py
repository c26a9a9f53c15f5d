"""Servers that count the calls they answer, for the swarm's truth checks.

    python _counting_servers.py mcpfast COUNTFILE serve-args...   # mcpfast serve + a `counted` tool
    python _counting_servers.py sdk COUNTFILE server-args...      # peers/python_sdk/server.py + the same

Both add a tool ``counted(text)`` that returns ``text`` and appends one byte to COUNTFILE (opened
O_APPEND, so every process of a stdio swarm adds to the same file): the file's size is the number
of calls the server answered, counted by the server itself.  Everything else is the unmodified
server (the reference one through ``mcpfast serve --app``, the official SDK one as in the bench).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _counter(path: str):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def counted(text: str) -> str:
        """Return the text; count the call."""
        os.write(fd, b"x")
        return text

    return counted


def main() -> None:
    kind, countfile, *rest = sys.argv[1:]
    counted = _counter(countfile)
    if kind == "mcpfast":
        from mcpfast.cli import main as cli
        from mcpfast.server.demo import app

        app.tool()(counted)
        sys.argv = ["mcpfast", "serve", "--app", "mcpfast.server.demo:app", *rest]
        sys.exit(cli())
    if kind == "sdk":
        sys.path.insert(0, str(REPO / "peers" / "python_sdk"))
        import server  # peers/python_sdk/server.py

        server.app.tool(structured_output=False)(counted)
        server.main(rest)
        return
    raise SystemExit(f"unknown server kind {kind!r}")


if __name__ == "__main__":
    main()
