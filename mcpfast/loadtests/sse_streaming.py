"""Streaming family: ``--mcp-stream-tool`` with ``--mcp-stream-args`` (default ``{"n":
--mcp-stream-count}``, the reference server's argument name) and a progress token: ``tools/call:stream`` (whole call), ``progress:first-event``/``progress:gap`` (both transports) and
``sse:first-event``/``sse:gap`` (HTTP; the gap rate is the events/s).  Over HTTP each user also
holds its session's long-lived stream beside its calls, as a real client does, from the moment the
session is ready until it ends, in its own greenlet and on its own connection: the GET stream
(``GET:open``, ``GET:event``; ``GET:405`` when the server offers none) or, in 2026-07-28,
``subscriptions/listen`` (``subscriptions/listen:ack``).  A stream the server ends is opened
again, at most once a second; the call rate is the server's, not a wait's."""

import locust  # noqa: F401, I001 - first

from locust import task

from mcpfast.client.http import HttpClient
from mcpfast.loadtests._common import McpUser


class SseStreamingUser(McpUser):
    native_family = "sse_streaming"

    @task
    def stream(self) -> None:
        if not self.ready():
            return
        if isinstance(self.mcp, HttpClient):  # stdio and HTTP+SSE: the session is the connection
            # once per session: a new session (after a lost one) replaces the stream; delete()
            # and close() in on_stop end it
            self.mcp.hold_stream()
        self.mcp.call_tool(self.stream_tool, self.stream_args, stream=True)
