"""Running the HTTP transport: mcpfast's own server (``native``), or uvicorn or granian over ASGI."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from mcpfast.server.app import Server

__all__ = ["DEFAULT_RUNNER", "build_app", "granian_factory", "run"]

RUNNERS: Final = ("native", "uvicorn", "granian")
DEFAULT_RUNNER: Final = "native"
"""Chosen by measurement: bench_results/http/server_choice.md."""
_ENV: Final = "MCPFAST_HTTP_APP"


def build_app(spec: str, options: dict[str, Any]) -> Any:
    """The ASGI app for a ``module:attr`` server spec and JSON-able options (incl. ``auth``)."""
    from mcpfast.adapters import load_server

    opts = dict(options)
    auth_opts = opts.pop("auth", None)
    if auth_opts:
        from mcpfast.auth import ResourceServer

        opts["auth"] = ResourceServer(**auth_opts)
    inline = bool(opts.pop("inline_sync_tools", False))
    return _transport(load_server(spec, inline_sync_tools=inline), opts)


def _transport(server: Server, opts: dict[str, Any]) -> Any:
    """The transport for ``server``: scaled out (``store``, ``secret``), 2026 only (``stateless_only``), counted (``metrics``)."""
    from mcpfast.transports.http import asgi_app

    metrics = opts.pop("metrics", False)
    only_stateless = opts.pop("stateless_only", False)
    app: Any = asgi_app(_scaled(server, opts), **opts)
    if only_stateless:
        from mcpfast.transports.stateless_only import stateless_only

        app = stateless_only(app)
    if metrics:
        from mcpfast.transports.metrics import with_metrics

        return with_metrics(app)
    return app


def _scaled(server: Server, opts: dict[str, Any]) -> Server:
    """``store`` (a URL) becomes a ``SessionStore``; ``secret`` (or the store's shared key) seals 2026 state."""
    from mcpfast.sansio.mrtr import StateSealer
    from mcpfast.server.tasks import open_task_store
    from mcpfast.store import open_store
    from mcpfast.store.tasks import MemoryTaskStore

    url = opts.pop("store", None)
    secret = opts.pop("secret", None)
    store = open_store(url) if isinstance(url, str) else url
    if store is not None:
        opts["store"] = store
    key = secret.encode() if isinstance(secret, str) else (store.shared_secret() if store is not None else None)
    if key is not None:
        server.sealer = StateSealer(key, ttl=server.sealer.ttl)
    if isinstance(url, str) and store is not None and store.shared and isinstance(server.tasks.store, MemoryTaskStore):
        server.tasks.store = open_task_store(url)  # any process answers tasks/get for a task another runs
    return server


def granian_factory() -> Any:
    """Granian's app factory: rebuilds the app in the worker from the environment."""
    config = json.loads(os.environ[_ENV])
    return build_app(config["spec"], config["options"])


def run(
    server: Server | str,
    host: str,
    port: int,
    *,
    runner: str = DEFAULT_RUNNER,
    log_level: str = "warning",
    grace: float = 5.0,
    sock: Any = None,
    server_options: dict[str, Any] | None = None,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    **options: Any,
) -> None:
    """Serve until interrupted. ``server`` is a Server, or a ``module:attr`` spec (needed for granian).

    ``options`` configure the transport (``HttpTransport``); ``server_options`` the native
    server (``HttpServer``: ``max_connections``, ``head_timeout``); under uvicorn
    ``max_connections`` becomes its ``limit_concurrency``. ``grace``: seconds SIGTERM lets
    requests in flight finish (native); ``sock``: a bound socket to serve instead of binding
    ``host:port`` (a ``--workers`` worker's SO_REUSEPORT socket). ``tls_cert``/``tls_key``
    (PEM files, both or neither): HTTPS, on every runner.
    """
    if (tls_cert is None) != (tls_key is None):
        raise ValueError("TLS needs both a certificate and its key")
    server_options = dict(server_options or {})
    if runner not in RUNNERS:
        raise ValueError(f"unknown runner {runner!r} (one of {', '.join(RUNNERS)})")
    if runner == "native":
        import logging

        import uvloop

        from mcpfast.transports.http_server import serve, tls_server_context

        if tls_cert is not None and tls_key is not None:
            server_options["tls"] = tls_server_context(tls_cert, tls_key)
        logging.basicConfig(level=log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
        app = build_app(server, options) if isinstance(server, str) else _direct(server, options)
        uvloop.run(serve(app, host, port, freeze_gc=True, sock=sock, grace=grace, **server_options))
        return
    if runner == "granian" and isinstance(server, str):
        try:
            from granian import Granian
        except ImportError:
            raise RuntimeError("--runner granian needs granian: pip install 'mcpfast[granian]'") from None
        from granian.constants import HTTPModes, Interfaces, Loops, RuntimeModes

        os.environ[_ENV] = json.dumps({"spec": server, "options": options})
        Granian(
            "mcpfast.transports.http_runner:granian_factory",
            address=host,
            port=port,
            interface=Interfaces.ASGI,
            loop=Loops.uvloop,
            http=HTTPModes.http1,
            runtime_mode=RuntimeModes.st,
            runtime_threads=1,
            factory=True,
            workers=1,
            log_enabled=log_level.lower() in ("debug", "info"),
            respawn_failed_workers=False,
            ssl_cert=Path(tls_cert) if tls_cert else None,
            ssl_key=Path(tls_key) if tls_key else None,
        ).serve()
        return
    import uvicorn

    app = build_app(server, options) if isinstance(server, str) else _direct(server, options)
    uvicorn.run(
        app,
        host=host,
        port=port,
        http="httptools",
        ws="none",
        loop="uvloop",
        log_level=log_level.lower(),
        lifespan="on",
        limit_concurrency=server_options.get("max_connections"),
        ssl_certfile=tls_cert,
        ssl_keyfile=tls_key,
    )


def _direct(server: Server, options: dict[str, Any]) -> Any:
    return _transport(server, dict(options))
