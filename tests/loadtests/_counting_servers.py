"""Servers that count the calls they answer, for the swarm's truth checks.

    python _counting_servers.py mcpfast COUNTFILE serve-args...   # mcpfast serve + a `counted` tool
    python _counting_servers.py sdk COUNTFILE server-args...      # peers/python_sdk/server.py + the same

Both add a tool ``counted(text)`` that returns ``text`` and appends one byte to COUNTFILE (opened
O_APPEND, so every process of a stdio swarm adds to the same file): the file's size is the number
of calls the server answered, counted by the server itself. Each call also appends its wall-clock
time in nanoseconds (8 bytes, little-endian) to COUNTFILE.ns: when the server answered, second by
second, to hold a load's interval log against (:func:`answered_between`).  Everything else is the unmodified
server (the reference one through ``mcpfast serve --app``, the official SDK one as in the bench).
"""

from __future__ import annotations

import os
import struct
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _counter(path: str):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    times = os.open(path + ".ns", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def counted(text: str) -> str:
        """Return the text; count the call."""
        os.write(times, struct.pack("<q", time.time_ns()))
        os.write(fd, b"x")
        return text

    return counted


def answered_between(countfile: Path, windows: list[tuple[float, float]]) -> list[int]:
    """How many calls the server answered in each ``(start s, end s)`` window of wall-clock time."""
    data = Path(str(countfile) + ".ns").read_bytes()
    stamps = [ns / 1e9 for (ns,) in struct.iter_unpack("<q", data)]
    return [sum(1 for t in stamps if start <= t < end) for start, end in windows]


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
