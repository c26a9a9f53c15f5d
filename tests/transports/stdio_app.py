"""App served as a subprocess by the stdio tests: a tool that prints, to prove stdout stays clean."""

from __future__ import annotations

import sys

from mcpfast import Server

app = Server("stdio-test")


@app.tool()
def noisy(text: str) -> str:
    """Prints to stdout and stderr, then returns the text."""
    print("this print must not reach the protocol stream")
    sys.stdout.write("neither must this\n")
    return text
