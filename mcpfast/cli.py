"""``mcpfast`` command line: ``mcpfast serve --transport stdio [--app module:attr | --fixture conformance]``."""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import sys
from typing import Any

# ``--app`` names an mcpfast Server, or an official-SDK / FastMCP app served through an adapter.
from mcpfast.adapters import load_server as load_app

__all__ = ["load_app", "main"]

_FIXTURES = {"conformance": "mcpfast.server.conformance:app"}
_EXTRAS: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "bench": (("swarm", ("locust", "gevent", "geventhttpclient")), ("bench", ("matplotlib", "numpy"))),
    "capacity": (("swarm", ("locust", "gevent", "geventhttpclient")), ("bench", ("matplotlib", "numpy"))),
    "report": (("bench", ("matplotlib", "numpy")),),
    "compare": (("bench", ("matplotlib", "numpy")),),
    "uvicorn": (("uvicorn", ("uvicorn",)),),
    "granian": (("granian", ("granian",)),),
}
"""What a command (or an HTTP runner) needs beyond ``pip install mcpfast``: extra -> its modules."""


def missing_extra(need: str) -> str | None:
    """The message naming the extra to install when ``need`` lacks one of its modules, else ``None``."""
    for extra, modules in _EXTRAS.get(need, ()):
        absent = [name for name in modules if importlib.util.find_spec(name) is None]
        if absent:
            return f"mcpfast: {need} needs {', '.join(absent)}: pip install 'mcpfast[{extra}]'"
    return None


_DEMO = "mcpfast.server.demo:app"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mcpfast", description="Serve and measure the Model Context Protocol.")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run an MCP server")
    serve.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    source = serve.add_mutually_exclusive_group()
    source.add_argument(
        "--app",
        help="the server to serve, as module:attribute: an mcpfast Server, an official-SDK MCPServer or a FastMCP app "
        "(docs/sdk-apps.md; default: the demo app)",
    )
    source.add_argument("--fixture", choices=sorted(_FIXTURES), help="serve a built-in fixture")
    serve.add_argument(
        "--inline-sync-tools",
        action="store_true",
        help="(an official-SDK MCPServer --app) run its plain def tools on the event loop, not in the SDK's worker "
        "thread: faster, for tools that never block (one that blocks stalls every other request)",
    )
    serve.add_argument("--host", default="127.0.0.1", help="(http) address to bind")
    serve.add_argument("--port", type=int, default=8000, help="(http) port to bind")
    serve.add_argument("--max-in-flight", type=int, default=None, help="requests served at once (stdio)")
    serve.add_argument("--log-level", default="WARNING", help="stderr log level (default WARNING)")
    _http_arguments(serve)
    _token_parser(sub)
    sub.add_parser(
        "locustfiles",
        help="print the folder of the swarm's locustfiles (for `locust -f`), then the families in it on stderr",
    )
    from mcpfast.bench.cli import add_subcommands as _add_bench_subcommands

    _add_bench_subcommands(sub)
    return parser


def _http_arguments(serve: argparse.ArgumentParser) -> None:
    """``--transport http`` options (mcpfast/transports/http.py, mcpfast/auth/)."""
    from mcpfast.transports.http_runner import DEFAULT_RUNNER, RUNNERS

    group = serve.add_argument_group("http transport")
    group.add_argument(
        "--runner",
        choices=RUNNERS,
        default=DEFAULT_RUNNER,
        help="HTTP server: native (mcpfast's own, the default), or uvicorn/granian over ASGI",
    )
    group.add_argument("--allowed-origin", action="append", default=[], help="extra allowed Origin (repeatable; '*': any)")
    group.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        help="Host served, as host, host:* or host:port (repeatable; '*': any; default when bound to loopback: "
        "localhost, 127.0.0.1, [::1], any port; else any)",
    )
    group.add_argument("--max-connections", type=int, default=None, help="open connections at most (native runner; default 10000)")
    group.add_argument("--head-timeout", type=float, default=None, help="seconds for a request head to arrive (native runner; default 10)")
    group.add_argument("--max-body", type=int, default=None, help="largest request body in bytes (default 4 MiB)")
    group.add_argument("--max-sessions", type=int, default=None, help="open sessions at most (default 10000)")
    group.add_argument("--session-idle-timeout", type=float, default=None, help="seconds before an idle session ends")
    group.add_argument("--keepalive", type=float, default=None, help="seconds between SSE keep-alive comments")
    group.add_argument("--store", default=None, help="where sessions live: memory (default) or redis://HOST:PORT/DB (shared)")
    group.add_argument("--secret", default=None, help="key sealing 2026 requestState (default: shared through --store, else random)")
    group.add_argument("--metrics", action="store_true", help="serve Prometheus metrics at /metrics (summed over --workers)")
    group.add_argument(
        "--workers", type=int, default=1, help="processes serving the port (SO_REUSEPORT; >1 needs --store redis:// or --stateless-only)"
    )
    group.add_argument(
        "--stateless-only",
        action="store_true",
        help="serve 2026-07-28 stateless requests only: initialize gets -32022, GET/DELETE 405, no /sse (no sessions)",
    )
    group.add_argument("--grace", type=float, default=5.0, help="seconds SIGTERM lets requests in flight finish")
    group.add_argument("--tls-cert", metavar="PEM", help="serve HTTPS: the certificate chain, leaf first (every runner; needs --tls-key)")
    group.add_argument("--tls-key", metavar="PEM", help="the private key of --tls-cert")
    group.add_argument("--no-legacy-sse", action="store_true", help="do not serve the 2024-11-05 /sse endpoints")
    group.add_argument("--auth-jwks", help="JWKS (file path or https URL) that signs accepted access tokens")
    group.add_argument("--auth-issuer", help="required token issuer (iss)")
    group.add_argument("--auth-server", action="append", default=[], help="authorization server URL for the metadata")
    group.add_argument("--resource-url", help="this server's canonical resource URI (token audience)")
    group.add_argument("--auth-scopes", default="", help="scopes every request needs (space or comma separated)")
    group.add_argument(
        "--auth-leeway",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="clock skew tolerated on a token's exp/nbf/iat (default 30; 0: a token is refused the second it expires)",
    )


def _token_parser(sub: Any) -> None:
    token = sub.add_parser("token", help="mint a test access token (or create a signing key)")
    token.add_argument("--key", help="private key file (PEM) to sign with")
    token.add_argument("--new-key", metavar="KEYFILE", help="write a new key pair to KEYFILE (PEM)")
    token.add_argument("--jwks", help="with --new-key: write the public JWKS here")
    token.add_argument("--issuer", default="https://auth.example.test")
    token.add_argument("--audience", default="http://127.0.0.1:8000/mcp")
    token.add_argument("--scope", default="", help="space separated scopes")
    token.add_argument("--subject", default="test-user")
    token.add_argument("--ttl", type=int, default=3600, help="lifetime in seconds")


def _serve_http(args: argparse.Namespace, argv: list[str]) -> int:
    from mcpfast.protocol.host import default_allowed_hosts
    from mcpfast.transports import workers as serve_workers
    from mcpfast.transports.http_runner import run

    problem = serve_workers.check(args.workers, args.store, args.stateless_only)
    if problem is None:
        problem = _tls_problem(args.tls_cert, args.tls_key)
    if problem is not None:
        print(f"mcpfast: {problem}", file=sys.stderr)
        return 2
    worker = os.environ.get(serve_workers.WORKER_ENV)
    if args.workers > 1 and worker is None:
        if args.runner != "native":
            print("mcpfast: --workers needs the native runner", file=sys.stderr)
            return 2
        load_app(_FIXTURES[args.fixture] if args.fixture else (args.app or _DEMO), inline_sync_tools=args.inline_sync_tools)  # fail early
        return serve_workers.supervise(argv, args.workers, args.grace, metrics=args.metrics)

    options: dict[str, Any] = {}
    if args.allowed_origin:
        options["allowed_origins"] = args.allowed_origin
    allowed_hosts = args.allowed_host or default_allowed_hosts(args.host)
    if allowed_hosts is not None:
        options["allowed_hosts"] = list(allowed_hosts)
    server_options = {name: getattr(args, name) for name in ("max_connections", "head_timeout") if getattr(args, name) is not None}
    for name in ("max_body", "max_sessions", "session_idle_timeout", "keepalive", "store", "secret"):
        value = getattr(args, name)
        if value is not None:
            options[name] = value
    if args.metrics:
        options["metrics"] = True
    if args.no_legacy_sse or args.stateless_only:
        options["sse_path"] = None
    if args.stateless_only:
        options["stateless_only"] = True
    if args.auth_jwks:
        if not args.resource_url:
            print("mcpfast: --auth-jwks needs --resource-url (the token audience)", file=sys.stderr)
            return 2
        if not args.auth_leeway >= 0:
            print(f"mcpfast: --auth-leeway must be >= 0 seconds, not {args.auth_leeway}", file=sys.stderr)
            return 2
        options["auth"] = {
            "jwks": args.auth_jwks,
            "issuer": args.auth_issuer,
            "resource": args.resource_url,
            "scopes": [s for s in args.auth_scopes.replace(",", " ").split() if s],
            "authorization_servers": args.auth_server or ([args.auth_issuer] if args.auth_issuer else []),
            "leeway": args.auth_leeway,
        }
    spec = _FIXTURES[args.fixture] if args.fixture else (args.app or _DEMO)
    load_app(spec, inline_sync_tools=args.inline_sync_tools)  # fail early, in this process, on a bad spec
    if args.inline_sync_tools:
        options["inline_sync_tools"] = True
    problem = missing_extra(args.runner)
    if problem is not None:
        print(problem.replace(f"mcpfast: {args.runner}", f"mcpfast: --runner {args.runner}", 1), file=sys.stderr)
        return 2
    if worker is not None:
        options["sock"] = serve_workers.reuse_port_socket(args.host, args.port)
    run(
        spec,
        args.host,
        args.port,
        runner=args.runner,
        log_level=args.log_level,
        grace=args.grace,
        server_options=server_options,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        **options,
    )
    return 0


def _tls_problem(cert: str | None, key: str | None) -> str | None:
    """Why ``--tls-cert``/``--tls-key`` cannot serve, found before the port is bound; else None."""
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        return "--tls-cert and --tls-key go together"
    from mcpfast.transports.http_server import tls_server_context

    try:
        tls_server_context(cert, key)
    except ValueError as e:
        return f"--tls-cert/--tls-key: {e}"
    return None


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``mcpfast`` command.

    Returns:
        The process exit code.
    """
    argv = sys.argv[1:] if argv is None else argv
    args = _parser().parse_args(argv)
    if args.command == "serve":
        if args.transport == "http":
            logging.basicConfig(stream=sys.stderr, level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
            return _serve_http(args, argv)
        # stdout belongs to the protocol: every log line goes to stderr.
        logging.basicConfig(stream=sys.stderr, level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
        app = load_app(_FIXTURES[args.fixture] if args.fixture else (args.app or _DEMO), inline_sync_tools=args.inline_sync_tools)
        from mcpfast.transports.stdio import run_stdio

        options: dict[str, Any] = {}
        if args.max_in_flight is not None:
            options["max_in_flight"] = args.max_in_flight
        run_stdio(app, **options)
        return 0
    if args.command == "token":
        from mcpfast.auth.tokens import token_command

        return token_command(args)
    if args.command == "locustfiles":
        from mcpfast.locust.locustfiles import LOCUSTFILES, families

        print(LOCUSTFILES)
        print("families: " + " ".join(families()), file=sys.stderr)
        return 0
    if args.command in ("bench", "capacity", "report", "compare"):
        problem = missing_extra(args.command)
        if problem is not None:
            print(problem, file=sys.stderr)
            return 2
        from mcpfast.bench.cli import run_subcommand

        return run_subcommand(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
