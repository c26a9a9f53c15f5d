"""Serve a sample app with its framework's own server, for the tests that compare it with mcpfast's.

``python own_server.py MODULE:OBJ stdio`` runs the app's own stdio server;
``python own_server.py MODULE:OBJ http PORT`` its own Streamable HTTP app (the SDK's
``streamable_http_app()``, FastMCP's ``http_app()``) under uvicorn on 127.0.0.1:PORT, path ``/mcp``.
The sample apps are imported from this folder.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any


def load(spec: str) -> Any:
    module, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module), attr)


def main(argv: list[str]) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    app = load(argv[0])
    is_fastmcp = type(app).__module__.startswith("fastmcp")
    if argv[1] == "stdio":
        if is_fastmcp:
            app.run("stdio", show_banner=False)
        else:
            app.run("stdio")
        return
    import uvicorn

    http = app.http_app(path="/mcp") if is_fastmcp else app.streamable_http_app(streamable_http_path="/mcp")
    uvicorn.run(http, host="127.0.0.1", port=int(argv[2]), log_level="warning", lifespan="on")


if __name__ == "__main__":
    main(sys.argv[1:])
