"""A server whose ``echo`` tool counts its calls: one byte per call appended to the file named by
``MCPFAST_COUNT_FILE`` (the server's own count, independent of the load engine's)."""

from __future__ import annotations

import os

from mcpfast.server.app import Server

app = Server("counting")
_fd = os.open(os.environ["MCPFAST_COUNT_FILE"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)


@app.tool()
def echo(text: str) -> str:
    """Return the text; count the call."""
    os.write(_fd, b"x")
    return text
