"""``--metrics`` with the native server's lane: the lane counts what it answers (in the core),
``/metrics`` adds its counts to the full path's when it is read, and every request is counted
once, whichever path answered it, in one process and over ``--workers``.

The in-process tests serve the same app twice, counted, with the lane and without it: the same
requests must give the same counts on both, while the lane answered most of them on one.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _support import child_env, free_port, metric, start_process, stop_process, wait_until
from prometheus_client.parser import text_string_to_metric_families

from mcpfast import Server, core
from mcpfast.protocol.errors import INVALID_PARAMS, McpError
from mcpfast.transports.http import asgi_app
from mcpfast.transports.http_testing import serve_in_thread
from mcpfast.transports.metrics import BUCKETS, LANE_TALLY, Metrics, with_metrics

pytestmark = [
    pytest.mark.timeout(90),
    pytest.mark.skipif(not core.HAS_LANE, reason="the lane is part of the compiled core; the pure-Python core has none"),
]

app = Server("lane-metrics-test")


@app.tool()
def echo(text: str) -> str:
    """Return the text."""
    return text


@app.tool()
def refuse(text: str) -> str:
    """A JSON-RPC error: 400 for a 2026-07-28 call."""
    raise McpError(INVALID_PARAMS, "refused", None)


@app.tool()
async def later(text: str) -> str:
    """An async tool that does not wait: answered at once, by the lane too."""
    return text


@app.tool()
async def waits(text: str) -> str:
    """An async tool that waits: the lane hands it on at its first wait, and counts it when
    its reply is written."""
    await asyncio.sleep(0.01)
    return text


INIT = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
).encode()
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


def post(body: bytes, extra: list[bytes] = ()) -> bytes:  # type: ignore[assignment]
    head = [b"POST /mcp HTTP/1.1", b"Host: 127.0.0.1", b"Accept: application/json, text/event-stream", b"Content-Type: application/json"]
    head += list(extra)
    head.append(b"Content-Length: %d" % len(body))
    return b"\r\n".join(head) + b"\r\n\r\n" + body


def delete(extra: list[bytes]) -> bytes:
    return b"\r\n".join([b"DELETE /mcp HTTP/1.1", b"Host: 127.0.0.1", *extra, b"Content-Length: 0"]) + b"\r\n\r\n"


def call(rid: int, name: str = "echo", arguments: Any = None, meta: dict[str, Any] | None = None) -> bytes:
    params: dict[str, Any] = {"name": name, "arguments": {"text": "x"} if arguments is None else arguments}
    if meta is not None:
        params["_meta"] = meta
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}).encode()


def stateless(rid: int, name: str = "echo", meta: dict[str, Any] = META, arguments: Any = None) -> bytes:
    extra = [b"MCP-Protocol-Version: 2026-07-28", b"Mcp-Method: tools/call", b"Mcp-Name: " + name.encode()]
    return post(call(rid, name, arguments, meta), extra)


class Client:
    """One kept-alive connection: each request's status."""

    def __init__(self, url: str) -> None:
        host, port = url.removeprefix("http://").split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.buf = b""

    def send(self, data: bytes) -> tuple[int, dict[bytes, bytes], bytes]:
        self.sock.sendall(data)
        return self.answer()

    def pipeline(self, requests: list[bytes]) -> list[int]:
        """The requests sent in one write, then each answer's status."""
        self.sock.sendall(b"".join(requests))
        return [self.answer()[0] for _ in requests]

    def answer(self) -> tuple[int, dict[bytes, bytes], bytes]:
        while b"\r\n\r\n" not in self.buf:
            self.buf += self._recv()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.split(b"\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(b":") for line in lines[1:])}
        length = int(headers.get(b"content-length", b"0"))
        while len(self.buf) < length:
            self.buf += self._recv()
        body, self.buf = self.buf[:length], self.buf[length:]
        return int(lines[0].split()[1]), headers, body

    def _recv(self) -> bytes:
        chunk = self.sock.recv(65536)
        assert chunk, "closed before an answer"
        return chunk

    def close(self) -> None:
        self.sock.close()


def counts(text: str) -> tuple[dict[tuple[str, str], float], dict[str, float]]:
    """``/metrics``: requests by (method, status), and the histogram's samples (by le, count, sum)."""
    requests: dict[tuple[str, str], float] = {}
    histogram: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "mcpfast_http_requests_total":
                requests[(s.labels["method"], s.labels["status"])] = s.value
            elif s.name.startswith("mcpfast_http_request_seconds"):
                histogram[s.name.rpartition("_")[2] + s.labels.get("le", "")] = s.value
    return requests, histogram


def scrape(url: str) -> str:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
        assert resp.headers["content-type"].startswith("text/plain")
        return resp.read().decode()


def session_traffic(url: str) -> int:
    """A session's life on one connection, most of it the lane's when there is one: how many
    requests were sent."""
    c = Client(url)
    try:
        status, headers, _ = c.send(post(INIT))
        assert status == 200
        sid = [b"Mcp-Session-Id: " + headers[b"mcp-session-id"], b"MCP-Protocol-Version: 2025-11-25"]
        sent = [post(b'{"jsonrpc":"2.0","method":"notifications/initialized"}', sid)]
        sent += [post(call(i), sid) for i in range(20)]  # the first learns the headers; then the lane's
        sent += [post(call(30, arguments={"text": 5}), sid)]  # a tool error, still 200
        sent += [post(call(31, "later"), sid)]  # async, answered at once
        sent += [post(call(33, "waits"), sid)]  # async, answered once it waited
        sent += [post(b'{"jsonrpc":"2.0","id":32,"method":"tools/list"}', sid)]
        sent += [stateless(40 + i) for i in range(5)]  # 2026-07-28 plain calls
        sent += [stateless(50, "refuse")]  # a JSON-RPC error: 400, from the lane too
        sent += [stateless(52, "waits")]  # async, answered once it waited
        sent += [stateless(51, meta={**META, "io.modelcontextprotocol/logLevel": "debug"})]  # not plain: the full path's
        sent += [delete(sid)]
        for request in sent:
            assert c.send(request)[0] in (200, 202, 400), request
        return 1 + len(sent)
    finally:
        c.close()


@pytest.fixture
def counted() -> Iterator[tuple[tuple[Metrics, str], tuple[Metrics, str]]]:
    with_lane, without = with_metrics(asgi_app(app)), with_metrics(asgi_app(app))
    with serve_in_thread(with_lane) as a, serve_in_thread(without, lane=False) as b:
        assert with_lane.transport.lane is not None and without.transport.lane is None
        yield (with_lane, a), (without, b)


def test_the_lanes_requests_are_counted_as_the_full_path_counts_them(counted: Any) -> None:
    (lane_app, lane_url), (_, full_url) = counted
    for _ in range(2):
        sent = session_traffic(lane_url)
        assert session_traffic(full_url) == sent
    lane = lane_app.transport.lane
    assert lane.answered >= 2 * 25  # most of them the lane's
    got, got_hist = counts(scrape(lane_url))
    want, want_hist = counts(scrape(full_url))
    assert got == want
    assert got[("tools/call", "200")] == 2 * (20 + 1 + 2 + 5 + 1 + 1)
    assert got[("tools/call", "400")] == 2
    assert got[("initialize", "200")] == 2 and got[("DELETE", "200")] == 2
    assert sum(got.values()) == 2 * sent
    assert got_hist["count"] == want_hist["count"] == 2 * sent
    assert got_hist["bucket+Inf"] == 2 * sent
    assert got_hist["sum"] > 0
    # cumulative buckets, each at most the next
    buckets = [got_hist["bucket" + str(b)] for b in BUCKETS]
    assert buckets == sorted(buckets)


def test_no_request_is_lost_or_counted_twice_under_load(counted: Any) -> None:
    (lane_app, lane_url), _ = counted
    errors: list[BaseException] = []
    sent: list[int] = []

    def user(n: int) -> None:
        try:
            c = Client(lane_url)
            _, headers, _ = c.send(post(INIT))
            sid = [b"Mcp-Session-Id: " + headers[b"mcp-session-id"], b"MCP-Protocol-Version: 2025-11-25"]
            c.send(post(b'{"jsonrpc":"2.0","method":"notifications/initialized"}', sid))
            calls = 0
            for i in range(150):
                # pipelined pairs, every seventh the full path's: the lane answers, stops, the full path goes on
                batch = [post(call(i, "later" if i % 7 == 0 else "echo"), sid), post(call(1000 + i), sid)]
                assert c.pipeline(batch) == [200, 200]
                calls += 2
            sent.append(calls)
            c.close()
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    before = counts(scrape(lane_url))[0].get(("tools/call", "200"), 0)
    answered = lane_app.transport.lane.answered
    threads = [threading.Thread(target=user, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert lane_app.transport.lane.answered - answered > 500
    after = counts(scrape(lane_url))[0][("tools/call", "200")]
    assert after - before == sum(sent) == 4 * 300


def test_one_process_has_the_process_series(counted: Any) -> None:
    (_, lane_url), _ = counted
    text = scrape(lane_url)
    assert metric(text, "process_cpu_seconds_total") > 0
    assert metric(text, "process_resident_memory_bytes") > 1 << 20


def _tallies(directory: Path) -> dict[int, int]:
    """Requests each worker's lane counted, by pid, read from its tally file."""
    import mmap

    found = {}
    for path in directory.glob(LANE_TALLY.format(pid="*")):
        with open(path, "r+b") as f:
            if os.fstat(f.fileno()).st_size == 0:
                continue
            mapped = mmap.mmap(f.fileno(), 0)
        with mapped, memoryview(mapped) as raw, raw.cast("Q") as view:
            tally = core.HttpLane.read_tally(view)
        if tally is not None:
            found[int(path.name.split("-")[2].split(".")[0])] = sum(n for _, _, n in tally[0])
    return found


def _workers(parent: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
                found.append(int(entry.name))
    return found


def test_workers_sum_every_workers_lane_and_full_path_counts() -> None:
    port = free_port()
    cmd = [sys.executable, "-m", "mcpfast", "serve", "--transport", "http", "--stateless-only", "--metrics", "--workers", "2"]
    sup = start_process([*cmd, "--host", "127.0.0.1", "--port", str(port)], port, "mcpfast serve --workers 2", env=child_env())
    url = f"http://127.0.0.1:{port}"
    try:
        assert wait_until(lambda: len(_workers(sup.pid)) == 2, timeout=20)
        environ = Path(f"/proc/{_workers(sup.pid)[0]}/environ").read_bytes().split(b"\0")
        shared = Path(next(v for v in environ if v.startswith(b"PROMETHEUS_MULTIPROC_DIR=")).split(b"=", 1)[1].decode())
        sent: dict[str, int] = {}
        for i in range(60):  # a connection each: the kernel spreads them over the workers
            c = Client(url)
            requests = [stateless(1), stateless(2), stateless(3)]  # the first learns the headers; then the lane's
            if i % 3 == 0:
                requests.append(stateless(4, meta={**META, "io.modelcontextprotocol/logLevel": "debug"}))  # the full path's
            if i % 5 == 0:
                requests.append(stateless(5, "nope"))  # a tool it does not have: an error
            for status in c.pipeline(requests):
                sent[str(status)] = sent.get(str(status), 0) + 1
            c.close()
        text = scrape(url)
        assert len(sent) == 2, sent  # 200, and the unknown tool's error status
        for status, n in sent.items():
            assert metric(text, "mcpfast_http_requests_total", method="tools/call", status=status) == n, (status, text)
        assert metric(text, "mcpfast_http_request_seconds_count") == sum(sent.values())
        lanes = _tallies(shared)
        assert 0 < sum(lanes.values()) < sum(sent.values()), lanes  # both paths answered some
        assert metric(text, "process_cpu_seconds_total") > 0
        assert metric(text, "process_resident_memory_bytes") > 2 * (1 << 20)
    finally:
        sup.send_signal(signal.SIGTERM)
        try:
            sup.wait(30)
        except subprocess.TimeoutExpired:
            stop_process(sup)


def test_prometheus_scraping_a_server_under_load_sees_every_request(tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "loadtests"))
    try:
        from test_swarm_prometheus import Prometheus  # the loadtests' own Prometheus on a free port
    finally:
        sys.path.pop(0)
    port = free_port()
    cmd = [sys.executable, "-m", "mcpfast", "serve", "--transport", "http", "--metrics", "--host", "127.0.0.1", "--port", str(port)]
    server = start_process(cmd, port, "mcpfast serve --metrics", env=child_env())
    url = f"http://127.0.0.1:{port}"
    prom = Prometheus(tmp_path / "prometheus", f"127.0.0.1:{port}")
    try:
        sent = 0
        deadline = time.monotonic() + 4  # several scrapes while it runs
        c = Client(url)
        _, headers, _ = c.send(post(INIT))
        sid = [b"Mcp-Session-Id: " + headers[b"mcp-session-id"], b"MCP-Protocol-Version: 2025-11-25"]
        c.send(post(b'{"jsonrpc":"2.0","method":"notifications/initialized"}', sid))
        while time.monotonic() < deadline:
            batch = [post(call(i), sid) for i in range(20)] + [post(call(99, "stream", {"n": 0}), sid)]
            assert c.pipeline(batch) == [200] * len(batch)
            sent += len(batch)
        c.close()
        query = 'mcpfast_http_requests_total{method="tools/call",status="200"}'

        def stored() -> float:
            return sum(prom.values(query).values())

        assert wait_until(lambda: stored() == sent, timeout=20), (stored(), sent)
        assert sum(prom.values("process_cpu_seconds_total").values()) > 0
    finally:
        prom.stop()
        stop_process(server)
