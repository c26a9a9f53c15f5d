"""The Locust process's OAuth access token (``--mcp-oauth-client-id``): fetched at test start by
every process that runs users (not by a master), shared by its gevent users and native engines,
refreshed by one greenlet before it expires and when a server calls it ``invalid_token``. Every
token request is an ``oauth:token`` row of the run's stats; a process that cannot get its first
token logs why, stops its run and exits 2.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

import gevent
import locust
import orjson
from locust.runners import MasterRunner

from mcpfast import __version__
from mcpfast.client.oauth import OAuthError, TokenSource
from mcpfast.client.reach import Reach
from mcpfast.locust import stats as mstats
from mcpfast.locust.options import option, reach

__all__ = ["ROW", "install", "source"]

logger = logging.getLogger(__name__)

ROW: Final = "oauth:token"
_ATTR = "mcpfast_oauth"
_TICK_S: Final = 0.25  # how soon the refresher sees a token called invalid
_RETRY_S: Final = (1.0, 10.0)  # a refused refresh is asked again after 1 s, doubling up to 10 s


def _fetcher(how: Reach, mcp_url: str, timeout: float) -> Any:
    """``fetch(method, url, headers, body)`` over the process's TLS context and ``--mcp-connect-to``;
    the MCP server's own origin gets the ``--mcp-header``s too."""
    clients: dict[tuple[str, int, bool], Any] = {}
    mine = urlsplit(mcp_url)

    def fetch(method: str, url: str, headers: dict[str, str], body: bytes | None) -> tuple[int, dict[str, str], bytes]:
        parts = urlsplit(url)
        tls = parts.scheme == "https"
        host, port = parts.hostname or "", parts.port or (443 if tls else 80)
        client = clients.get((host, port, tls))
        if client is None:
            client = clients[(host, port, tls)] = how.http_client(
                host, port, tls, concurrency=1, connection_timeout=timeout, network_timeout=timeout
            )
        sent = {"Host": parts.netloc, **headers}  # the connection goes to an address
        if (parts.scheme, parts.netloc) == (mine.scheme, mine.netloc):
            sent = {**how.fixed_headers(host, port, tls), **sent}
            sent.pop("Connection", None)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        try:
            resp = client.request(method, path, body=body, headers=sent)
            try:
                data = resp.read(1 << 20)
                found = {k.lower(): v for k, v in resp.items()}
                return resp.status_code, found, data
            finally:
                resp.release()
        except OSError:
            raise
        except Exception as exc:  # geventhttpclient's parser and timeout errors are not OSErrors
            raise OSError(f"{url}: {exc}") from None

    return fetch


@dataclass
class _Held:
    """A process's token source and the greenlet that refreshes it."""

    pid: int
    source: TokenSource
    refresher: Any = None


def source(environment: Any) -> TokenSource | None:
    """This process's token source (None without ``--mcp-oauth-client-id``; a fork gets its own)."""
    got = getattr(environment, _ATTR, None)
    if got is not None and got.pid == os.getpid():
        return got.source
    how = reach(environment)
    creds = how.oauth
    if creds is None or option(environment, "mcp_command"):
        return None
    url = str(getattr(environment, "host", None) or "")
    stats = mstats.get(environment)

    def report(ms: float, length: int, error: BaseException | None) -> None:
        stats.report("mcp-http", ROW, int(ms * 1000), length, error)

    probe = orjson.dumps(
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": str(option(environment, "mcp_protocol_version")),
                "capabilities": {},
                "clientInfo": {"name": "mcpfast-swarm", "version": __version__},
            },
        }
    )
    src = TokenSource(creds, url, _fetcher(how, url, float(option(environment, "mcp_timeout"))), report, probe=probe)
    setattr(environment, _ATTR, _Held(os.getpid(), src))
    return src


def _refresher(src: TokenSource) -> None:
    retry = _RETRY_S[0]
    while True:
        wait = src.seconds_to_refresh()
        if wait is None or wait > 0:
            gevent.sleep(_TICK_S if wait is None else min(wait, _TICK_S))
            continue
        try:
            src.refresh()
            retry = _RETRY_S[0]
        except (OAuthError, OSError) as exc:
            logger.warning("mcpfast: oauth: refreshing the access token: %s (again in %.0f s)", exc, retry)
            src.due = time.monotonic() + retry
            retry = min(retry * 2, _RETRY_S[1])


def _on_test_start(environment: Any, **_kw: Any) -> None:
    if isinstance(environment.runner, MasterRunner):
        return  # the workers fetch their own tokens
    src = source(environment)
    if src is None:
        return
    held = getattr(environment, _ATTR)
    try:
        if src.token is None or src.seconds_to_refresh() == 0:
            src.start()
            logger.info(
                "mcpfast: oauth: access token from %s for %s (expires in %s s)",
                src.found.issuer if src.found else "?",
                src.found.resource if src.found else "?",
                src.token.expires_in if src.token else "?",
            )
    except (OAuthError, OSError) as exc:
        logger.error("mcpfast: oauth: %s", exc)
        environment.process_exit_code = 2
        runner = environment.runner
        if runner is not None:
            gevent.spawn(runner.quit)
        return
    if held.refresher is None or held.refresher.dead:
        held.refresher = gevent.spawn(_refresher, src)


def _on_quitting(environment: Any, **_kw: Any) -> None:
    got = getattr(environment, _ATTR, None)
    if got is not None and got.pid == os.getpid() and got.refresher is not None:
        got.refresher.kill(block=False)


def install(environment: Any) -> None:
    """Register the token's start and end with the environment's events (idempotent)."""
    if getattr(environment, "mcpfast_oauth_installed", False):
        return
    environment.mcpfast_oauth_installed = True
    environment.events.test_start.add_listener(_on_test_start)
    environment.events.quitting.add_listener(_on_quitting)


def _on_global_init(environment: Any, **_kw: Any) -> None:
    install(environment)


# the users and the native driver import this module, so every locustfile that runs them has it
locust.events.init.add_listener(_on_global_init)
