"""``resources/subscribe`` is shared: a subscription taken on one process is honoured by every
other, so a resource update noticed anywhere reaches the subscriber's GET stream.

Two servers (each its own ``Server``, ``HttpTransport`` and ``RedisStore``) on their own loops
in this process, sharing one real Redis: each notifies only the sessions it holds itself
(``Server.notify_resource_updated``), as two processes would.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import pytest
from scale_client import Mcp, until

from mcpfast.server import Server
from mcpfast.store.redis import RedisStore
from mcpfast.transports.http import HttpTransport
from mcpfast.transports.http_testing import serve_in_thread

pytestmark = pytest.mark.timeout(120)

URI = "test://watched"


def _server() -> Server:
    srv = Server("watch")

    @srv.resource(URI, name="watched", mime_type="text/plain")
    def watched() -> str:
        return "content"

    @srv.tool()
    def touch() -> str:
        """Tell this process's subscribers the resource changed."""
        return f"notified {srv.notify_resource_updated(URI)}"

    return srv


@contextmanager
def _pair(url: str) -> Iterator[tuple[int, int]]:
    with ExitStack() as stack:
        ports = []
        for _ in range(2):
            base = stack.enter_context(serve_in_thread(HttpTransport(_server(), store=RedisStore(url), session_idle_timeout=30)))
            ports.append(int(base.rsplit(":", 1)[1]))
        yield ports[0], ports[1]


def _touch(client: Mcp) -> str:
    status, reply = client.call("tools/call", {"name": "touch", "arguments": {}})
    assert status == 200, reply
    return str(reply["result"]["content"][0]["text"])


def test_a_subscription_taken_on_one_process_is_honoured_by_the_other(redis) -> None:
    with _pair(redis.url) as (a, b):
        client = Mcp(a)
        client.initialize()
        get = client.get_stream()  # held by a
        assert client.on(b).call("resources/subscribe", {"uri": URI})[0] == 200  # taken on b
        # b notices a change: its copy of the session subscribed; the GET stream on a gets it.
        assert _touch(client.on(b)) == "notified 1"
        _, note = get.message()
        assert note == {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": URI}}
        # a notices one too: the subscription reached its copy (through the bus).
        until(lambda: _touch(client.on(a)) == "notified 1", what="a's copy subscribed")
        _, note = get.message()
        assert note["params"] == {"uri": URI}
        # Unsubscribed on a: neither process notifies any more.
        assert client.on(a).call("resources/unsubscribe", {"uri": URI})[0] == 200
        until(lambda: _touch(client.on(b)) == "notified 0", what="b's copy unsubscribed")
        assert _touch(client.on(a)) == "notified 0"
        get.close()


def test_a_process_that_loads_the_session_later_gets_its_subscriptions(redis) -> None:
    with _pair(redis.url) as (a, b):
        client = Mcp(a)
        client.initialize()
        assert client.call("resources/subscribe", {"uri": URI})[0] == 200
        # b has never seen the session: it loads the record, subscriptions included (the
        # subscribe was answered once the record had it).
        assert _touch(client.on(b)) == "notified 1"
