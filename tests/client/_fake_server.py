"""A tiny configurable MCP server for the client tests (stdio or HTTP), standard library only.

    python _fake_server.py stdio [--mode MODE] [--delay-ms N]
    python _fake_server.py http PORTFILE [--mode MODE] [--delay-ms N] [--sse]

Modes: ``ok`` (echo/add/stream tools, prompts, resources, completion, ping from the server on
``tools/call:ping_me``), ``wrong-id`` (replies carry id+1000), ``invalid-json`` (replies are not
JSON), ``bad-sse`` (HTTP only: an SSE event whose data is not JSON), ``stall`` (every
``--stall-every``-th tools/call sleeps ``--stall-ms`` while holding a lock every tools/call takes,
so the whole server stalls), ``modern`` (2026-07-28 only: no initialize).  The ``delay`` tool
waits exactly ``arguments.ms`` milliseconds (sleep, then a spin for the last 0.7 ms).
Not an MCP implementation: just enough of the wire for the client's tests.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time

COUNT = 0
LOCK = threading.Lock()
STALL_LOCK = threading.Lock()  # stall mode: every tools/call passes here, so a stall blocks them all


def precise_sleep(seconds: float) -> None:
    """Sleep, then spin the last 0.7 ms: an injected delay exact to a few µs."""
    end = time.perf_counter() + seconds
    if seconds > 0.001:
        time.sleep(seconds - 0.0007)
    while time.perf_counter() < end:
        pass


def tool_result(text: str) -> dict:
    return {"content": [{"type": "text", "text": text}], "isError": False}


def handle(msg: dict, args: argparse.Namespace, emit) -> dict | None:
    """Return the reply dict for one request (None for a notification)."""
    global COUNT
    method = msg.get("method")
    if "id" not in msg:
        return None
    rid = msg["id"]
    params = msg.get("params") or {}
    with LOCK:
        COUNT += 1
        n = COUNT
    if args.delay_ms:
        time.sleep(args.delay_ms / 1000.0)
    if args.mode == "stall" and method == "tools/call":
        with STALL_LOCK:
            if n % args.stall_every == 0:
                time.sleep(args.stall_ms / 1000.0)
    modern = "io.modelcontextprotocol/protocolVersion" in (params.get("_meta") or {})

    def ok(result: dict) -> dict:
        if modern:
            result = {"resultType": "complete", **result}
        out = {"jsonrpc": "2.0", "id": rid, "result": result}
        if args.mode == "wrong-id":
            out["id"] = rid + 1000 if isinstance(rid, int) else rid + "x"
        return out

    def err(code: int, message: str, data=None) -> dict:
        e = {"code": code, "message": message}
        if data is not None:
            e["data"] = data
        return {"jsonrpc": "2.0", "id": rid, "error": e}

    if method == "initialize":
        if args.mode == "modern":
            return err(-32022, "unsupported protocol version", {"supported": ["2026-07-28"], "requested": params.get("protocolVersion")})
        return ok(
            {
                "protocolVersion": "2025-11-25" if params.get("protocolVersion", "") >= "2025-11-25" else params.get("protocolVersion"),
                "capabilities": {"tools": {}, "prompts": {}, "resources": {}, "completions": {}},
                "serverInfo": {"name": "fake", "version": "0"},
            }
        )
    if method == "server/discover":
        if args.mode == "modern":
            return ok({"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}, "ttlMs": 0, "cacheScope": "public"})
        return err(-32601, "method not found")
    if method == "ping":
        return ok({})
    if method == "tools/list":
        return ok({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]})
    if method == "tools/call":
        name = params.get("name")
        arguments = params.get("arguments") or {}
        token = (params.get("_meta") or {}).get("progressToken")
        if name == "echo":
            return ok(tool_result(str(arguments.get("text", ""))))
        if name == "delay":
            precise_sleep(float(arguments.get("ms", 0)) / 1000.0)
            return ok(tool_result("slept"))
        if name == "add":
            return ok(tool_result(str(arguments.get("a", 0) + arguments.get("b", 0))))
        if name == "stream":
            count = int(arguments.get("n", 10))
            for i in range(count):
                if token is not None:
                    emit(
                        {
                            "jsonrpc": "2.0",
                            "method": "notifications/progress",
                            "params": {"progressToken": token, "progress": i + 1, "total": count},
                        }
                    )
                time.sleep(0.001)
            return ok(tool_result(f"streamed {count}"))
        if name == "ping_me":
            emit({"jsonrpc": "2.0", "id": "srv-1", "method": "ping"})
            emit({"jsonrpc": "2.0", "id": "srv-2", "method": "roots/list"})
            return ok(tool_result("pinged"))
        if name == "fail":
            return ok({"content": [{"type": "text", "text": "boom"}], "isError": True})
        if name == "flaky":  # two kinds of failure, told apart by their latency: a slow tool error, a quick -32603
            if n % 2:
                precise_sleep(0.005)
                return ok({"content": [{"type": "text", "text": "slow boom"}], "isError": True})
            return err(-32603, "quick boom")
        return err(-32602, "unknown tool")
    if method == "resources/list":
        return ok({"resources": [{"uri": "mem://a", "name": "a"}]})
    if method == "resources/read":
        return ok({"contents": [{"uri": params.get("uri"), "text": "A"}]})
    if method == "prompts/list":
        return ok({"prompts": [{"name": "greet"}]})
    if method == "prompts/get":
        return ok({"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}]})
    if method == "completion/complete":
        return ok({"completion": {"values": ["a"], "hasMore": False}})
    return err(-32601, "method not found")


def encode(reply: dict, args: argparse.Namespace) -> bytes:
    if args.mode == "invalid-json":
        return b'{"jsonrpc": "2.0", "id": ' + str(reply.get("id")).encode() + b', "result": {oops'
    return json.dumps(reply, separators=(",", ":")).encode()


def run_stdio(args: argparse.Namespace) -> None:
    out = sys.stdout.buffer
    wlock = threading.Lock()

    def emit(obj: dict) -> None:
        with wlock:
            out.write(json.dumps(obj, separators=(",", ":")).encode() + b"\n")
            out.flush()

    for line in sys.stdin.buffer:
        line = line.strip()
        if not line:
            continue
        msg = json.loads(line)
        sys.stderr.write("got " + str(msg.get("method")) + "\n")
        if "method" not in msg:
            continue  # a reply to our server->client request
        reply = handle(msg, args, emit)
        if reply is not None:
            with wlock:
                out.write(encode(reply, args) + b"\n")
                out.flush()


def run_http(args: argparse.Namespace) -> None:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a) -> None:
            pass

        def setup(self) -> None:
            import socket

            super().setup()
            self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def _send(self, status: int, body: bytes, ctype: str = "application/json", extra: dict | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def do_DELETE(self) -> None:
            self._send(200, b"")

        def do_GET(self) -> None:
            self._send(405, b"")

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if args.token and self.headers.get("Authorization") != f"Bearer {args.token}":
                self._send(401, b"", extra={"WWW-Authenticate": "Bearer"})
                return
            msg = json.loads(body)
            if "method" not in msg or "id" not in msg:
                self._send(202, b"")
                return
            events: list[bytes] = []
            sse = args.sse or args.mode == "bad-sse"
            if sse:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()

                def emit(obj: dict) -> None:
                    self._chunk(b"event: message\ndata: " + json.dumps(obj).encode() + b"\n\n")
            else:

                def emit(obj: dict) -> None:
                    events.append(json.dumps(obj).encode())

            reply = handle(msg, args, emit)
            extra = {"Mcp-Session-Id": "fake-session-1"} if msg.get("method") == "initialize" else {}
            if sse:
                if args.mode != "bad-sse":
                    self._chunk(b"event: message\ndata: " + encode(reply, args) + b"\n\n")
                else:
                    self._chunk(b"data: {not json\n\n")
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            else:
                status = 200
                if reply.get("error", {}).get("code") in (-32022, -32601) and args.mode == "modern":
                    status = 400 if reply["error"]["code"] == -32022 else 404
                self._send(status, encode(reply, args), extra=extra)

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    server = ThreadingHTTPServer(("127.0.0.1", 0), H)
    server.daemon_threads = True
    with open(args.portfile, "w") as fh:
        fh.write(str(server.server_address[1]))
    deadline = time.monotonic() + args.lifetime
    server.timeout = 0.5
    while time.monotonic() < deadline:
        server.handle_request()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("transport", choices=["stdio", "http"])
    p.add_argument("portfile", nargs="?")
    p.add_argument("--mode", default="ok")
    p.add_argument("--delay-ms", type=float, default=0.0)
    p.add_argument("--stall-every", type=int, default=200)
    p.add_argument("--stall-ms", type=float, default=500.0)
    p.add_argument("--sse", action="store_true")
    p.add_argument("--lifetime", type=float, default=120.0)
    p.add_argument("--token", default=None, help="HTTP: require this bearer token")
    args = p.parse_args()
    if args.transport == "stdio":
        run_stdio(args)
    else:
        run_http(args)


if __name__ == "__main__":
    main()
