"""The ``Host`` header: its syntax (RFC 9112 §3.2, RFC 3986 §3.2.2) and the allow-list that,
next to the ``Origin`` check, protects a local server from DNS rebinding.

Pure functions, no I/O. A request needs exactly one valid ``Host`` (repeated fields arrive
joined with ``", "``, which is never a valid value): else 400. With an allow-list, a valid host
outside it gets 421 (Misdirected Request): a page on ``evil.example`` whose name was rebound
to 127.0.0.1 sends ``Host: evil.example``. Entries are ``host`` or ``host:*`` (any port) or
``host:port``; ``*`` allows every host.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from typing import Final

__all__ = [
    "LOOPBACK_HOSTS",
    "HostRules",
    "absolute_form",
    "default_allowed_hosts",
    "is_loopback",
    "parse_host",
]

LOOPBACK_HOSTS: Final = ("localhost", "127.0.0.1", "[::1]")
"""The names a client of a server bound to loopback uses (any port)."""

_HOST = re.compile(
    rb"(?:\[(?P<literal>[0-9A-Fa-f:.]+)\]|(?P<name>(?:%[0-9A-Fa-f]{2}|[A-Za-z0-9\-._~!$&'()*+,;=])*))"
    rb"(?::(?P<port>[0-9]{0,5}))?"
)


def parse_host(value: bytes) -> tuple[str, int | None] | None:
    """``(host, port)`` of a valid ``Host`` value (host lower-cased, an IPv6 literal in
    brackets; port ``None`` when absent or empty), or ``None`` when the value is invalid."""
    match = _HOST.fullmatch(value)
    if match is None:
        return None
    literal = match.group("literal")
    if literal is not None:
        try:
            ipaddress.IPv6Address(literal.decode("ascii"))
        except ValueError:
            return None
        host = "[" + literal.decode("ascii").lower() + "]"
    else:
        host = match.group("name").decode("ascii").lower()
    port = match.group("port")
    if port:
        number = int(port)
        if number > 65535:
            return None
        return host, number
    return host, None


def absolute_form(target: bytes) -> tuple[bytes, bytes] | None:
    """``(authority, origin-form target)`` of an absolute-form request target
    (``http://host:port/mcp?q`` -> ``host:port``, ``/mcp?q``), else ``None``. The server uses
    that authority as the Host and ignores any ``Host`` field received (RFC 9112 §3.2.2)."""
    scheme, sep, rest = target.partition(b"://")
    if not sep or scheme.lower() not in (b"http", b"https"):
        return None
    cut = min((i for i in (rest.find(b"/"), rest.find(b"?")) if i >= 0), default=len(rest))
    path = rest[cut:]
    return rest[:cut], path if path[:1] == b"/" else b"/" + path


def is_loopback(bind_host: str) -> bool:
    """Whether a server bound to ``bind_host`` is reachable from this machine only."""
    if bind_host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(bind_host.strip("[]")).is_loopback
    except ValueError:
        return False


def default_allowed_hosts(bind_host: str) -> tuple[str, ...] | None:
    """The loopback names when bound to loopback; ``None`` (no allow-list) otherwise."""
    return LOOPBACK_HOSTS if is_loopback(bind_host) else None


class HostRules:
    """The ``Host`` check for one server: syntax always, the allow-list when one is given.

    ``check(value)`` is ``None`` (serve the request) or ``(status, message)``; verdicts are
    cached per value (clients send a handful).
    """

    __slots__ = ("_any", "_cache", "_hosts", "_pairs")

    def __init__(self, allowed_hosts: Iterable[str] | None = None) -> None:
        entries = None if allowed_hosts is None else [h.strip().lower() for h in allowed_hosts]
        self._any = entries is None or "*" in entries
        self._hosts: frozenset[str] = frozenset()
        self._pairs: frozenset[tuple[str, int]] = frozenset()
        if not self._any:
            assert entries is not None
            hosts: set[str] = set()
            pairs: set[tuple[str, int]] = set()
            for entry in entries:
                name = entry.removesuffix(":*")
                parsed = parse_host(name.encode("ascii"))
                if parsed is None:
                    raise ValueError(f"not a valid allowed host: {entry!r}")
                if parsed[1] is None or name != entry:
                    hosts.add(parsed[0])
                else:
                    pairs.add((parsed[0], parsed[1]))
            self._hosts = frozenset(hosts)
            self._pairs = frozenset(pairs)
        self._cache: dict[bytes | None, tuple[int, str] | None] = {}

    def check(self, value: bytes | None) -> tuple[int, str] | None:
        try:
            return self._cache[value]
        except KeyError:
            pass
        verdict = self._judge(value)
        if len(self._cache) < 256:
            self._cache[value] = verdict
        return verdict

    def _judge(self, value: bytes | None) -> tuple[int, str] | None:
        if value is None:
            return 400, "bad request: missing Host header"
        parsed = parse_host(value)
        if parsed is None:
            return 400, "bad request: invalid Host header (or more than one)"
        if self._any or parsed[0] in self._hosts or parsed in self._pairs:
            return None
        return 421, "misdirected request: host not allowed"
