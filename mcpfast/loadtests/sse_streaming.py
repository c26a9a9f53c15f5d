"""Streaming family: ``--mcp-stream-tool`` with ``--mcp-stream-args`` (default ``{"n":
--mcp-stream-count}``, the reference server's argument name) and a progress token: ``tools/call:stream`` (whole call), ``progress:first-event``/``progress:gap`` (both transports) and
``sse:first-event``/``sse:gap`` (HTTP; the gap rate is the events/s).  Every 10th iteration over
HTTP also opens the long-lived stream for 0.5 s: the GET stream (``GET:open``; ``GET:405`` when the
server offers none) or, in 2026-07-28, ``subscriptions/listen`` (``subscriptions/listen:ack``)."""

import locust  # noqa: F401, I001 - first

from locust import task
from _common import McpUser

LISTEN_EVERY = 10
LISTEN_SECONDS = 0.5


class SseStreamingUser(McpUser):
    native_family = "sse_streaming"
    iterations = 0

    @task
    def stream(self) -> None:
        if not self.ready():
            return
        self.mcp.call_tool(self.stream_tool, self.stream_args, stream=True)
        self.iterations += 1
        if self.session_is_connection or self.iterations % LISTEN_EVERY != 1:
            return
        if self.mcp.session.stateless:
            self.mcp.listen(LISTEN_SECONDS)
        else:
            self.mcp.open_get_stream(LISTEN_SECONDS).wait(LISTEN_SECONDS + 1.0)
