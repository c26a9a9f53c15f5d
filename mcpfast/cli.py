"""``mcpfast`` command line: ``mcpfast serve --transport stdio [--app module:attr | --fixture conformance]``."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from typing import Any

__all__ = ["load_app", "main"]

_FIXTURES = {"conformance": "mcpfast.server.conformance:app"}
_DEMO = "mcpfast.server.demo:app"


def load_app(spec: str) -> Any:
    """Import ``module:attribute`` (or ``module``, meaning its ``app``) and return the Server.

    Raises:
        SystemExit: the module or attribute cannot be found.
    """
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise SystemExit(f"mcpfast: cannot import {module_name!r}: {exc}") from exc
    obj: Any = module
    for part in (attr or "app").split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise SystemExit(f"mcpfast: {module_name!r} has no attribute {attr or 'app'!r}") from None
    return obj


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mcpfast", description="Serve and measure the Model Context Protocol.")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run an MCP server")
    serve.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    source = serve.add_mutually_exclusive_group()
    source.add_argument("--app", help="the Server to serve, as module:attribute (default: the demo app)")
    source.add_argument("--fixture", choices=sorted(_FIXTURES), help="serve a built-in fixture")
    serve.add_argument("--host", default="127.0.0.1", help="(http) address to bind")
    serve.add_argument("--port", type=int, default=8000, help="(http) port to bind")
    serve.add_argument("--max-in-flight", type=int, default=None, help="requests served at once (stdio)")
    serve.add_argument("--log-level", default="WARNING", help="stderr log level (default WARNING)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``mcpfast`` command.

    Returns:
        The process exit code.
    """
    args = _parser().parse_args(argv)
    if args.command == "serve":
        if args.transport == "http":
            print("mcpfast: --transport http is not built yet; use --transport stdio", file=sys.stderr)
            return 2
        # stdout belongs to the protocol: every log line goes to stderr.
        logging.basicConfig(stream=sys.stderr, level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
        app = load_app(_FIXTURES[args.fixture] if args.fixture else (args.app or _DEMO))
        from mcpfast.transports.stdio import run_stdio

        options: dict[str, Any] = {}
        if args.max_in_flight is not None:
            options["max_in_flight"] = args.max_in_flight
        run_stdio(app, **options)
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
