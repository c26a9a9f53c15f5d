"""The demo server plus a ``broadcast`` tool, for the ``hold`` family's fan-out latency:

    python loadtests/_broadcast_server.py --transport http --host 127.0.0.1 --port 8000

``broadcast()`` sends ``notifications/tools/list_changed`` to every session (each held GET stream
receives it) and returns how many sessions it reached.  Everything else is ``mcpfast serve``'s
demo app, unchanged.
"""

from __future__ import annotations

import sys


def main() -> None:
    from mcpfast.cli import main as cli
    from mcpfast.server.demo import app

    @app.tool()
    def broadcast() -> str:
        """Send notifications/tools/list_changed to every session; returns how many got it."""
        return str(app.notify_list_changed("tools"))

    sys.argv = ["mcpfast", "serve", "--app", "mcpfast.server.demo:app", *sys.argv[1:]]
    sys.exit(cli())


if __name__ == "__main__":
    main()
