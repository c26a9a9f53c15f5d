"""Where the gevent client's connections go (mcpfast.client.reach): every address of a name in
turn, IPv6 too, resolved once; a --mcp-connect-to aim first; the URL's name in Host whenever the
connection goes to an address."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from mcpfast.client.reach import Reach, connect_to


def records(*addrs: str) -> Any:
    """A resolver answering ``addrs`` (each twice, as getaddrinfo does for TCP and UDP)."""
    calls: list[str] = []

    def resolve(host: str, port: int, **_kw: Any) -> list[tuple]:
        calls.append(host)
        fam = {True: socket.AF_INET6, False: socket.AF_INET}
        return [(fam[":" in a], socket.SOCK_STREAM, 6, "", (a, port)) for a in addrs for _ in (0, 1)]

    resolve.calls = calls  # type: ignore[attr-defined]
    return resolve


def test_every_record_in_turn_resolved_once() -> None:
    reach, resolve = Reach(), records("10.0.0.1", "2001:db8::7", "10.0.0.2")
    picks = [reach.next_address("mcp.example.test", 443, resolve) for _ in range(6)]
    assert picks == [("10.0.0.1", 443), ("2001:db8::7", 443), ("10.0.0.2", 443)] * 2
    assert resolve.calls == ["mcp.example.test"]


def test_the_system_resolver_and_literals() -> None:
    reach = Reach()
    assert reach.next_address("localhost", 80)[0] in {"127.0.0.1", "::1"}
    assert reach.next_address("::1", 8) == ("::1", 8)  # an address is not resolved
    with pytest.raises(OSError):
        reach.next_address("no-such-host.invalid", 80)


def test_connect_to_comes_first_and_host_stays_the_urls() -> None:
    reach = Reach(connect_to=(connect_to("mcp.example.test:443:127.0.0.1:8443"),))
    assert reach.next_address("mcp.example.test", 443, records("10.9.9.9")) == ("127.0.0.1", 8443)
    assert reach.fixed_headers("mcp.example.test", 443, True)["Host"] == "mcp.example.test"
    assert Reach().fixed_headers("mcp.example.test", 8443, True)["Host"] == "mcp.example.test:8443"
    assert "Host" not in Reach().fixed_headers("127.0.0.1", 80, False)
