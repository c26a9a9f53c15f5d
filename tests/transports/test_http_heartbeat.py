"""Keep-alive comments on SSE streams: one timer for every stream served, a comment on each
stream that stayed silent, none on a stream that is sending, and nothing kept of a stream gone."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2 as httpx
import pytest
from _support import wait_until

from mcpfast import Server
from mcpfast.transports.http import asgi_app
from mcpfast.transports.http_routing import Heartbeat, Stream
from mcpfast.transports.http_testing import SERVERS, serve_in_thread

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def sync_session(c: httpx.Client, url: str) -> dict[str, str]:
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    r = c.post(url, json=init, headers=HEADERS)
    h = {**HEADERS, "Mcp-Session-Id": r.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
    assert c.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=h).status_code == 202
    return h


app = Server("heartbeat")


@app.tool()
def echo(text: str) -> str:
    return text


def test_one_timer_marks_every_silent_stream_and_spares_a_sending_one() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        timers: list[float] = []
        arm = loop.call_later

        def counted(delay: float, callback: Any, *args: Any) -> asyncio.TimerHandle:
            if getattr(callback, "__self__", None) is beat:  # the heartbeat's own ticks
                timers.append(delay)
            return arm(delay, callback, *args)

        loop.call_later = counted  # type: ignore[method-assign]
        beat = Heartbeat(0.1)
        idle = [Stream() for _ in range(200)]
        busy = Stream()
        for s in [*idle, busy]:
            beat.add(s)
        assert len(beat) == 201
        assert timers == [0.05]  # one timer for all 201 streams, ticking at half the period
        stop = loop.time() + 0.25
        while loop.time() < stop:
            beat.sent(busy)
            await asyncio.sleep(0.01)
        assert all(beat.take_due(s) for s in idle)
        assert not beat.take_due(busy)
        assert not beat.take_due(idle[0])  # taken once
        for s in [*idle, busy]:
            beat.discard(s)
        assert len(beat) == 0
        armed = len(timers)
        await asyncio.sleep(0.12)  # the tick after the last stream went does not re-arm
        assert len(timers) <= armed + 1
        await asyncio.sleep(0.12)
        assert len(timers) <= armed + 1

    asyncio.run(main())


def test_a_silent_stream_gets_a_nudge_when_a_comment_is_due() -> None:
    async def main() -> None:
        beat = Heartbeat(0.1)
        s = Stream()
        beat.add(s)
        await asyncio.wait_for(s.wait(), 1.0)  # woken with no message: a comment is due
        assert s.empty and beat.take_due(s)
        beat.discard(s)

    asyncio.run(main())


@pytest.mark.parametrize("server", SERVERS)
def test_idle_get_streams_each_get_keepalive_comments(server: str) -> None:
    t = asgi_app(app, keepalive=0.2)
    with serve_in_thread(t, server=server) as base, httpx.Client(timeout=10) as c:
        url = base + "/mcp"
        sessions = [sync_session(c, url) for _ in range(3)]
        streams = [c.stream("GET", url, headers=h) for h in sessions]
        responses = [s.__enter__() for s in streams]
        try:
            assert all(r.status_code == 200 for r in responses)
            assert wait_until(lambda: len(t.heartbeat) == 3)
            for r in responses:
                comments = 0
                for line in r.iter_lines():
                    if line.startswith(":"):
                        comments += 1
                        if comments == 2:
                            break
                assert comments == 2
        finally:
            for s in streams:
                s.__exit__(None, None, None)
        for h in sessions:
            assert c.delete(url, headers=h).status_code == 200
        # a stream whose client went is no longer in the heartbeat
        assert wait_until(lambda: len(t.heartbeat) == 0)


def test_many_silent_streams_are_woken_in_slices_spread_over_the_half_period() -> None:
    """1,000 idle streams, at most 100 looked at a tick: ten ticks a half period, none wakes
    more than 100 streams, and every stream is due within one and a half periods of its start."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        ticks: list[float] = []
        arm = loop.call_later

        def counted(delay: float, callback: Any, *args: Any) -> asyncio.TimerHandle:
            if getattr(callback, "__self__", None) is beat:
                ticks.append(delay)
            return arm(delay, callback, *args)

        class Counted(Stream):
            __slots__ = ("tick",)

            def nudge(self, *args: Any) -> None:
                self.tick = len(ticks)  # the tick that woke it (timers armed so far)
                super().nudge(*args)

        loop.call_later = counted  # type: ignore[method-assign]
        beat = Heartbeat(0.2, per_tick=100)
        streams = [Counted() for _ in range(1000)]
        for s in streams:
            s.tick = -1
            beat.add(s)
        # the first round (from a half period on) marks them quiet, the second one due: the
        # last slice at 0.29 s
        await asyncio.sleep(0.35)
        assert all(beat.take_due(s) for s in streams)
        by_tick: dict[int, int] = {}
        for s in streams:
            by_tick[s.tick] = by_tick.get(s.tick, 0) + 1
        assert max(by_tick.values()) <= 100 and len(by_tick) >= 10, by_tick
        # after the first wait of a half period, a slice every tenth of it
        assert ticks[0] == pytest.approx(0.1) and ticks[1:] == pytest.approx([0.01] * (len(ticks) - 1)), ticks[:12]
        for s in streams:
            beat.discard(s)

    asyncio.run(main())


def test_a_heartbeat_needs_a_slice_of_at_least_one_stream() -> None:
    with pytest.raises(ValueError, match="per_tick"):
        Heartbeat(1.0, per_tick=0)
