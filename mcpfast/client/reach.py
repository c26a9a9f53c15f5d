"""How a client reaches a deployed server: TLS trust and client certificates, extra headers,
bearer tokens, the address to connect to, and when to open a new connection.

One :class:`Reach` per process, built from the options before any load. The gevent client
(:class:`mcpfast.client.http.HttpClient`) takes its SSL context and headers; the native engine
takes :meth:`Reach.engine_fields` and builds the same from them in Rust, so both engines verify,
authenticate and aim the same way. Each parser here raises ``argparse.ArgumentTypeError`` with
the reason, so a bad flag is refused before any run starts.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import re
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mcpfast.client.oauth import ClientCredentials

__all__ = [
    "NEW_CONNECTION",
    "RESERVED_HEADERS",
    "ConnectTo",
    "Reach",
    "checked",
    "connect_to",
    "header",
    "pem_file",
    "tls_reason",
    "token_file",
]

# Headers the clients write themselves: a second copy would make a request ambiguous.
RESERVED_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "content-type",
        "transfer-encoding",
        "connection",
        "accept",
        "mcp-session-id",
        "mcp-protocol-version",
        "mcp-method",
        "mcp-name",
    }
)
# keep: one kept-alive connection per user; session: a new one per session; request: per request
NEW_CONNECTION = ("keep", "session", "request")

_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")  # RFC 9110 token: a header name
_HOST_PORT = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[^:\[\]\s/]+):(\d{1,5})")


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def checked(parse: Callable[[str], Any]) -> Callable[[str], str]:
    """An argparse type that checks with ``parse`` and keeps the text: options travel from the
    Locust master to its workers as plain values, and each process parses them again."""

    def check(text: str) -> str:
        parse(text)
        return text

    check.__name__ = parse.__name__
    return check


def header(text: str) -> tuple[str, str]:
    """``'Name: value'``: a header sent on every request."""
    name, sep, value = text.partition(":")
    name, value = name.strip(), value.strip()
    if not sep or not _TOKEN.match(name):
        raise argparse.ArgumentTypeError(f"not 'Name: value': {text!r}")
    if any(c in value for c in "\r\n\0"):
        raise argparse.ArgumentTypeError(f"{name}: the value holds a line break or NUL")
    if name.lower() in RESERVED_HEADERS:
        raise argparse.ArgumentTypeError(f"{name}: set by the client itself, not by --mcp-header")
    return name, value


@dataclass(frozen=True)
class ConnectTo:
    """Connections meant for ``host:port`` go to ``to_host:to_port``; the TLS name and the
    ``Host`` header stay the URL's."""

    host: str
    port: int
    to_host: str
    to_port: int

    def text(self) -> str:
        def hp(h: str, p: int) -> str:
            return f"[{h}]:{p}" if ":" in h else f"{h}:{p}"

        return f"{hp(self.host, self.port)}:{hp(self.to_host, self.to_port)}"


def connect_to(text: str) -> ConnectTo:
    """``HOST:PORT:ADDR:PORT`` (IPv6 in brackets)."""
    m = re.fullmatch(f"{_HOST_PORT.pattern}:{_HOST_PORT.pattern}", text)
    ports = [int(m.group(2)), int(m.group(4))] if m else []
    if m is None or not all(0 < p < 65536 for p in ports):
        raise argparse.ArgumentTypeError(f"not HOST:PORT:ADDR:PORT (IPv6 in brackets): {text!r}")
    return ConnectTo(m.group(1).strip("[]"), ports[0], m.group(3).strip("[]"), ports[1])


def pem_file(path: str) -> str:
    """A readable PEM file (its contents are checked where it is used)."""
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 20)
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"{path}: {exc.strerror or exc}") from None
    if b"-----BEGIN " not in head:
        raise argparse.ArgumentTypeError(f"{path}: not a PEM file (no -----BEGIN line)")
    return path


def token_file(path: str) -> tuple[str, ...]:
    """Bearer tokens, one per line (a blank line or a token with spaces is refused)."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise argparse.ArgumentTypeError(f"{path}: {exc}") from None
    while lines and not lines[-1].strip():
        lines.pop()  # a final newline or two is not a token
    if not lines:
        raise argparse.ArgumentTypeError(f"{path}: no token in it")
    for n, line in enumerate(lines, 1):
        if not line.strip():
            raise argparse.ArgumentTypeError(f"{path}:{n}: empty line (one token per line)")
        if any(c.isspace() for c in line.strip()) or any(ord(c) < 32 for c in line):
            raise argparse.ArgumentTypeError(f"{path}:{n}: a token holds whitespace or a control character")
    return tuple(line.strip() for line in lines)


# OpenSSL's verify codes, named as the native engine names the same causes
_VERIFY_REASONS = {
    10: "certificate expired",
    9: "certificate not valid yet",
    18: "certificate from an unknown issuer",  # self-signed leaf
    19: "certificate from an unknown issuer",  # self-signed root in the chain
    20: "certificate from an unknown issuer",
    21: "certificate from an unknown issuer",
    23: "certificate revoked",
    26: "certificate not for a TLS server",
}


def tls_reason(exc: BaseException, host: str) -> str:
    """Why a TLS handshake failed, in the words the native engine uses for the same cause (one
    entry per cause in the failures table, without times or serial numbers)."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        code = exc.verify_code
        if code == 62:
            return f"certificate not valid for name {host}"
        return _VERIFY_REASONS.get(code, f"certificate rejected ({exc.verify_message})")
    if isinstance(exc, ssl.SSLError):
        return f"the server refused the handshake ({exc.reason or exc.__class__.__name__})"
    if isinstance(exc, ConnectionResetError):
        return "connection reset by the server"
    return "connection closed by the server"


@dataclass(frozen=True)
class Reach:
    """Everything about reaching the server that is not MCP."""

    ca_files: tuple[str, ...] = ()
    client_cert: str | None = None
    client_key: str | None = None
    insecure: bool = False
    headers: tuple[tuple[str, str], ...] = ()
    tokens: tuple[str, ...] = ()
    connect_to: tuple[ConnectTo, ...] = ()
    new_connection: str = "keep"
    cookies: bool = True
    retry_after: bool = False
    oauth: ClientCredentials | None = None
    _ssl: list[ssl.SSLContext] = field(default_factory=list, compare=False, repr=False)
    # every address of each host, resolved once, and how many connections were aimed at it
    _addresses: dict[tuple[str, int], tuple[list[tuple[str, int]], list[int]]] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if (self.client_cert is None) != (self.client_key is None):
            raise ValueError("--mcp-client-cert and --mcp-client-key go together")
        if self.new_connection not in NEW_CONNECTION:
            raise ValueError(f"new connection: one of {', '.join(NEW_CONNECTION)}, not {self.new_connection!r}")
        if self.tokens and any(k.lower() == "authorization" for k, _ in self.headers):
            raise ValueError("an Authorization header and bearer tokens both given")
        if self.oauth is not None and (self.tokens or any(k.lower() == "authorization" for k, _ in self.headers)):
            raise ValueError("OAuth client credentials and a token (or an Authorization header) both given")

    @classmethod
    def from_options(cls, get: Any) -> Reach:
        """From the ``--mcp-*`` options (``get(name)`` returns one, or its default)."""
        try:
            path = get("mcp_token_file")
            tokens: tuple[str, ...] = token_file(path) if path else ()
            headers = tuple(header(h) for h in get("mcp_header") or ())
            aims = tuple(connect_to(c) for c in get("mcp_connect_to") or ())
        except argparse.ArgumentTypeError as exc:
            raise ValueError(str(exc)) from None
        token = get("mcp_token")
        if token:
            if tokens:
                raise ValueError("--mcp-token and --mcp-token-file both given")
            tokens = (str(token),)
        client_id = get("mcp_oauth_client_id")
        oauth = None
        if client_id is not None:
            oauth = ClientCredentials(
                str(client_id),
                client_secret=get("mcp_oauth_client_secret"),
                private_key=get("mcp_oauth_private_key"),
                scope=get("mcp_oauth_scope") or None,
            )
        elif get("mcp_oauth_client_secret") or get("mcp_oauth_private_key") or get("mcp_oauth_scope"):
            raise ValueError("--mcp-oauth-client-secret, --mcp-oauth-private-key and --mcp-oauth-scope need --mcp-oauth-client-id")
        return cls(
            ca_files=tuple(get("mcp_ca_file") or ()),
            client_cert=get("mcp_client_cert"),
            client_key=get("mcp_client_key"),
            insecure=bool(get("mcp_insecure")),
            headers=headers,
            tokens=tokens,
            connect_to=aims,
            new_connection=str(get("mcp_new_connection") or "keep"),
            cookies=not get("mcp_no_cookie_jar"),
            retry_after=bool(get("mcp_retry_after")),
            oauth=oauth,
        )

    def token(self, n: int) -> str | None:
        """The bearer token of the ``n``-th user (each in turn), if any."""
        return self.tokens[n % len(self.tokens)] if self.tokens else None

    def address(self, host: str, port: int) -> tuple[str, int]:
        """Where connections meant for ``host:port`` go: the ``--mcp-connect-to`` aim, else the
        host itself (resolved by :meth:`next_address`)."""
        for c in self.connect_to:
            if c.host.lower() == host.lower() and c.port == port:
                return c.to_host, c.to_port
        return host, port

    def next_address(self, host: str, port: int, resolve: Callable[..., Any] = socket.getaddrinfo) -> tuple[str, int]:
        """The address of the next new connection to ``host:port``: every address the name has
        (IPv4 and IPv6), each in turn, so users spread over the records. Resolved once;
        ``OSError`` if the name has none."""
        to_host, to_port = self.address(host, port)
        if _is_ip(to_host):
            return to_host, to_port
        known = self._addresses.get((to_host, to_port))
        if known is None:
            found: list[tuple[str, int]] = []
            for *_, sockaddr in resolve(to_host, to_port, type=socket.SOCK_STREAM):
                if (sockaddr[0], to_port) not in found:
                    found.append((sockaddr[0], to_port))
            if not found:
                raise OSError(f"no address for {to_host}")
            known = self._addresses[(to_host, to_port)] = (found, [0])
        addrs, turn = known
        turn[0] += 1
        return addrs[(turn[0] - 1) % len(addrs)]

    def check_url(self, host: str, port: int) -> None:
        """Every ``--mcp-connect-to`` must name the URL's host and port."""
        for c in self.connect_to:
            if not (c.host.lower() == host.lower() and c.port == port):
                raise ValueError(f"--mcp-connect-to {c.text()} matches no URL (the URL is {host}:{port})")

    def http_client(self, host: str, port: int, tls: bool, **kw: Any) -> Any:
        """A ``geventhttpclient.HTTPClient`` for the URL's ``host:port``: aimed by
        ``--mcp-connect-to``, over TLS with the process's context and the URL's host as SNI."""
        from geventhttpclient import HTTPClient

        to_host, to_port = self.next_address(host, port)
        if tls:
            kw.update(
                ssl=True,
                ssl_context_factory=self._context_factory,
                insecure=self.insecure,
                ssl_options={"server_hostname": host},
            )
        return HTTPClient(to_host, to_port, **kw)

    def _context_factory(self, cafile: str | None = None) -> ssl.SSLContext:
        return self.ssl_context()

    def fixed_headers(self, host: str, port: int, tls: bool) -> dict[str, str]:
        """Headers of every request: ``--mcp-header``s, ``Host`` when aimed elsewhere (the
        URL's, not the address's), ``Connection: close`` for a new connection per request."""
        out = dict(self.headers)
        if self.address(host, port) != (host, port) or not _is_ip(host):  # connected by address, named by the URL
            name = f"[{host}]" if ":" in host else host
            out["Host"] = name if port == (443 if tls else 80) else f"{name}:{port}"
        if self.new_connection == "request":
            out["Connection"] = "close"
        return out

    def ssl_context(self) -> ssl.SSLContext:
        """The process's one client context (connections share its session cache): the system
        store (``SSL_CERT_FILE``/``SSL_CERT_DIR`` honoured) plus the CA files, the client
        certificate, ALPN ``http/1.1``, TLS 1.2 or later."""
        if self._ssl:
            return self._ssl[0]
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        env_file, env_dir = os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")
        if env_file or env_dir:  # create_default_context reads the variables only on some builds
            ctx.load_verify_locations(cafile=env_file or None, capath=env_dir or None)
        for path in self.ca_files:
            try:
                ctx.load_verify_locations(cafile=path)
            except (OSError, ssl.SSLError) as exc:
                raise ValueError(f"--mcp-ca-file {path}: {exc}") from None
        if self.client_cert and self.client_key:
            try:
                ctx.load_cert_chain(self.client_cert, self.client_key)
            except (OSError, ssl.SSLError) as exc:
                raise ValueError(f"--mcp-client-cert {self.client_cert} with --mcp-client-key {self.client_key}: {exc}") from None
        if self.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        ctx.set_alpn_protocols(["http/1.1"])
        self._ssl.append(ctx)
        return ctx

    def engine_fields(self, worker_index: int = 0) -> dict[str, Any]:
        """Keyword arguments of the native engine's ``EngineConfig`` (those that differ from its
        defaults; tokens rotated so that workers start apart)."""
        out: dict[str, Any] = {}
        if self.headers:
            out["headers"] = dict(self.headers)
        if self.tokens:
            k = worker_index % len(self.tokens)
            out["bearer_tokens"] = list(self.tokens[k:] + self.tokens[:k])
        if self.ca_files:
            out["ca_files"] = list(self.ca_files)
        if self.client_cert:
            out["client_cert"], out["client_key"] = self.client_cert, self.client_key
        if self.insecure:
            out["insecure"] = True
        if self.connect_to:
            out["connect_to"] = [c.text() for c in self.connect_to]
        if self.new_connection != "keep":
            out["new_connection"] = self.new_connection
        if not self.cookies:
            out["cookies"] = False
        if self.retry_after:
            out["retry_after"] = True
        return out
