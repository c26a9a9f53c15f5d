"""mcpfast's own fuzzer: mutated HTTP requests against the native server, mutated JSON-RPC lines
against the stdio server, each a real ``mcpfast serve`` process.

Properties checked on every case (a failure is counted, with its input kept):

- HTTP: the server sends exactly the answers the framing rules call for, and each is a
  well-formed response: one per request framed, plus one refusal when the bytes stop being a
  request (the count comes from the core's pure-Python ``parse_http``, the twin of the parser
  the server runs); a refusal's status is the one the rules give; no 5xx (501, an unsupported
  transfer coding, is the RFC's answer and is not counted); the connection closes after a
  refusal or ``Connection: close``, and after our EOF otherwise (no hang).
- stdio: exactly one reply per request (by id) in each batch of lines, and a sentinel ``ping``
  after the batch is answered (no hang, the stream goes on).
- Both: the process is alive at the end, a fresh client is served, RSS stays bounded.

``python tests/fuzz/fuzzer.py --seconds 600 --out bench_results/fuzz`` (``make fuzz``); the
test suite runs a short bounded pass (``tests/fuzz/test_fuzz_servers.py``).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import select
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[2]
MAX_HEAD = 64 * 1024
ANSWER_TIMEOUT = 10.0
"""Seconds an expected answer (or close) may take before the case counts as a hang."""

os.environ.setdefault("MCPFAST_CORE", "rust")
sys.path.insert(0, str(ROOT))
from mcpfast.bench.procs import free_port  # noqa: E402
from mcpfast.core import load  # noqa: E402

ORACLE = load("python")  # the pure-Python twin of the server's framing


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


@dataclass
class Report:
    kind: str
    cases: int = 0
    requests: int = 0
    answers: int = 0
    hangs: int = 0
    crashes: int = 0
    server_errors: int = 0
    wrong_answers: int = 0
    statuses: collections.Counter[int] = field(default_factory=collections.Counter)
    rss_start_kb: int = 0
    rss_end_kb: int = 0
    rss_peak_kb: int = 0
    alive_at_end: bool = False
    examples: list[str] = field(default_factory=list)

    def fail(self, what: str, data: bytes) -> None:
        if len(self.examples) < 20:
            self.examples.append(f"{what}: {data[:300]!r}")

    @property
    def failures(self) -> int:
        return self.hangs + self.crashes + self.server_errors + self.wrong_answers + (0 if self.alive_at_end else 1)

    def as_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "statuses"}
        out["statuses"] = dict(sorted(self.statuses.items()))
        out["rss_growth_kb"] = self.rss_end_kb - self.rss_start_kb
        return out


# ------------------------------------------------------------------------------- mutation

_TOKENS = [
    b"\r\n",
    b"\n",
    b"\r",
    b":",
    b" ",
    b"\t",
    b"\x00",
    b"\xff",
    b"\x7f",
    b",",
    b"0",
    b"9" * 20,
    b"Transfer-Encoding: chunked\r\n",
    b"Content-Length: 5\r\n",
    b"Content-Length: 99999999\r\n",
    b"Host: a\r\nHost: b\r\n",
    b"Host: exa mple\r\n",
    b"Upgrade: h2c\r\nConnection: Upgrade\r\n",
    b"Expect: 100-continue\r\n",
    b"Connection: close\r\n",
    b"HTTP/1.0",
    b"HTTP/1.1",
    b"HTTP/2",
    b"\x16\x03\x01\x02\x00",
    b"http://127.0.0.1/mcp",
    b"0\r\n\r\n",
    b"ffffffffffffffffff\r\n",
    b'{"jsonrpc":"2.0"',
    b"[",
    b"]",
    b"{",
    b"}",
    b'"',
    b"\\u0000",
    b"\xc3\x28",
    b"null",
    b"-1",
    b"1e999",
]


def mutate(rng: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.choice((1, 1, 2, 3, 5))):
        op = rng.randrange(7)
        at = rng.randrange(len(buf) + 1)
        if op == 0 and buf:  # flip a byte
            buf[min(at, len(buf) - 1)] = rng.randrange(256)
        elif op == 1:  # insert a token
            buf[at:at] = rng.choice(_TOKENS)
        elif op == 2 and buf:  # delete a range
            del buf[at : at + rng.randrange(1, 16)]
        elif op == 3 and buf:  # duplicate a range
            end = min(len(buf), at + rng.randrange(1, 64))
            buf[at:at] = buf[at:end]
        elif op == 4:  # truncate
            del buf[at:]
        elif op == 5:  # a long run (head and line limits)
            buf[at:at] = bytes([rng.choice(b"a \x00")]) * rng.choice((100, 5000, 70000))
        else:  # swap case in a span (header names, methods)
            end = min(len(buf), at + 8)
            buf[at:end] = bytes(buf[at:end]).swapcase()
    return bytes(buf)


# ------------------------------------------------------------------------------- HTTP


def _http_seeds(port: int, sid: bytes) -> list[bytes]:
    host = b"Host: 127.0.0.1:%d\r\n" % port
    common = host + b"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
    session = common + b"Mcp-Session-Id: " + sid + b"\r\nMCP-Protocol-Version: 2025-11-25\r\n"

    def post(body: bytes, headers: bytes = session, version: bytes = b"HTTP/1.1") -> bytes:
        return b"POST /mcp " + version + b"\r\n" + headers + b"Content-Length: %d\r\n\r\n" % len(body) + body

    call = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}'
    add = b'{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"add","arguments":{"a":1,"b":2}}}'
    init = (
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
        b'"capabilities":{},"clientInfo":{"name":"fuzz","version":"1"}}}'
    )
    chunked = b"POST /mcp HTTP/1.1\r\n" + session + b"Transfer-Encoding: chunked\r\n\r\n"
    chunked += b"%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n" % (10, call[:10], len(call) - 10, call[10:])
    return [
        post(call),
        post(add) + post(b'{"jsonrpc":"2.0","id":9,"method":"ping"}'),
        post(b'{"jsonrpc":"2.0","id":3,"method":"tools/list"}'),
        post(b'{"jsonrpc":"2.0","method":"notifications/initialized"}'),
        post(b'{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"demo://readme"}}'),
        post(init, common),
        post(call, session, b"HTTP/1.0"),
        chunked,
        b"POST /mcp HTTP/1.1\r\n" + session + b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(call) + call,
        b"DELETE /nowhere HTTP/1.1\r\n" + host + b"\r\n",
        b"GET /mcp HTTP/1.1\r\n" + host + b"Accept: text/event-stream\r\nMcp-Session-Id: nope\r\n\r\n",
        b"POST http://127.0.0.1:%d/mcp HTTP/1.1\r\n" % port + session[len(host) :] + b"Content-Length: %d\r\n\r\n" % len(call) + call,
    ]


def _expected(data: bytes) -> tuple[int, set[int] | None, bool]:
    """``(answers, refusal statuses allowed or None, server closes)`` for ``data``, then EOF."""
    requests, used, status, _need, _reason = ORACLE.parse_http(data, MAX_HEAD, 4 * 1024 * 1024)
    for i, request in enumerate(requests):
        if not request[4]:  # Connection: close (or HTTP/1.0): nothing after it is read
            return i + 1, None, True
    if status >= 400:
        allowed = {status}
        if len(data) - used > MAX_HEAD:  # the server, reading in pieces, may reach the head limit first
            allowed |= {414, 431}
        return len(requests) + 1, allowed, True
    return len(requests), None, False


class _Reader:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""
        self.eof = False
        self.headers: dict[bytes, bytes] = {}

    def _fill(self, deadline: float) -> bool:
        if self.eof:
            return False
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([self.sock], [], [], left)[0]:
            raise TimeoutError
        try:
            chunk = self.sock.recv(65536)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            self.eof = True
        self.buf += chunk
        return bool(chunk)

    def response(self, deadline: float) -> int | None:
        """One whole response's status (skipping ``100 Continue``); ``None`` at a clean EOF."""
        while True:
            while b"\r\n\r\n" not in self.buf:
                if not self._fill(deadline):
                    if self.buf:
                        raise ValueError(f"truncated response head {self.buf[:80]!r}")
                    return None
            head, self.buf = self.buf.split(b"\r\n\r\n", 1)
            lines = head.split(b"\r\n")
            parts = lines[0].split(b" ", 2)
            if len(parts) < 2 or parts[0] != b"HTTP/1.1" or not parts[1].isdigit():
                raise ValueError(f"bad status line {lines[0][:80]!r}")
            status = int(parts[1])
            if status == 100:
                continue
            headers = self.headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(b":") for line in lines[1:])}
            if headers.get(b"transfer-encoding") == b"chunked":
                while True:
                    while b"\r\n" not in self.buf:
                        if not self._fill(deadline):
                            raise ValueError("truncated chunked body")
                    size_line, self.buf = self.buf.split(b"\r\n", 1)
                    size = int(size_line, 16)
                    while len(self.buf) < size + 2:
                        if not self._fill(deadline):
                            raise ValueError("truncated chunk")
                    self.buf = self.buf[size + 2 :]
                    if size == 0:
                        return status
            length = int(headers.get(b"content-length", b"0"))
            while len(self.buf) < length:
                if not self._fill(deadline):
                    raise ValueError("truncated body")
            self.buf = self.buf[length:]
            return status


def _http_case(port: int, data: bytes, rng: random.Random, report: Report) -> None:
    answers, refusal, _closes = _expected(data)
    report.cases += 1
    report.requests += answers
    sock = socket.create_connection(("127.0.0.1", port), timeout=ANSWER_TIMEOUT)
    try:
        cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, rng.choice((0, 0, 1, 2))))) if len(data) > 1 else []
        start = 0
        try:
            for cut in [*cuts, len(data)]:
                sock.sendall(data[start:cut])
                start = cut
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused before all was sent: the answers are still read below
        try:
            sock.shutdown(socket.SHUT_WR)  # no more requests: the server must close once it has answered
        except OSError:
            pass
        reader = _Reader(sock)
        deadline = time.monotonic() + ANSWER_TIMEOUT
        got: list[int] = []
        try:
            while True:
                status = reader.response(deadline)
                if status is None:
                    break
                got.append(status)
        except TimeoutError:
            report.hangs += 1
            report.fail(f"hang after {got}", data)
            return
        except ValueError as exc:
            report.wrong_answers += 1
            report.fail(f"malformed answer ({exc})", data)
            return
        report.answers += len(got)
        report.statuses.update(got)
        if any(s >= 500 and s != 501 for s in got):
            report.server_errors += 1
            report.fail(f"5xx {got}", data)
        # Answers to requests the server closed on before reading (EOF after a partial one) may
        # be fewer only when nothing was refused; a refusal must come, with its status.
        if refusal is not None:
            if len(got) != answers or got[-1] not in refusal:
                report.wrong_answers += 1
                report.fail(f"expected {answers} answers ending {refusal}, got {got}", data)
        elif len(got) != answers:
            report.wrong_answers += 1
            report.fail(f"expected {answers} answers, got {got}", data)
    finally:
        sock.close()


def _start(args: list[str], **popen: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "mcpfast", "serve", *args], cwd=ROOT, **popen)


def _initialize(port: int) -> bytes | None:
    """A session on the server (a control client): its id, or ``None`` when not served."""
    body = (
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
        b'"capabilities":{},"clientInfo":{"name":"fuzz","version":"1"}}}'
    )
    request = (
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
        b"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s" % (port, len(body), body)
    )
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(request)
            reader = _Reader(sock)
            if reader.response(time.monotonic() + 5) != 200:
                return None
            return reader.headers.get(b"mcp-session-id")
    except (OSError, TimeoutError, ValueError):
        return None


def run_http(seconds: float, seed: int) -> Report:
    report = Report("http")
    rng = random.Random(seed)
    port = free_port()
    proc = _start(
        ["--transport", "http", "--port", str(port), "--session-idle-timeout", "5", "--head-timeout", "5"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        sid = None
        while sid is None:
            if proc.poll() is not None or time.monotonic() > deadline:
                report.crashes += 1
                report.fail("server did not start", b"")
                return report
            sid = _initialize(port)
            if sid is None:
                time.sleep(0.1)
        seeds = _http_seeds(port, sid)
        for data in seeds:  # the seeds themselves first: the baseline must pass
            _http_case(port, data, rng, report)
        report.rss_start_kb = rss_kb(proc.pid)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            first = rng.choice(seeds)
            data = mutate(rng, first + rng.choice(seeds) if rng.random() < 0.2 else first)
            try:
                _http_case(port, data, rng, report)
            except OSError as exc:
                if proc.poll() is not None:
                    report.crashes += 1
                    report.fail(f"server died ({exc})", data)
                    return report
                report.wrong_answers += 1
                report.fail(f"client error {exc!r}", data)
            if report.cases % 200 == 0:
                report.rss_peak_kb = max(report.rss_peak_kb, rss_kb(proc.pid))
        time.sleep(6)  # the fuzz sessions expire (--session-idle-timeout 5)
        report.rss_end_kb = rss_kb(proc.pid)
        report.rss_peak_kb = max(report.rss_peak_kb, report.rss_end_kb)
        report.alive_at_end = proc.poll() is None and _initialize(port) is not None
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        if proc.returncode not in (0, -15, None) and report.crashes == 0 and not report.alive_at_end:
            report.crashes += 1
    return report


# ------------------------------------------------------------------------------- stdio

_STDIO_SEEDS = [
    b'{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}',
    b'{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"add","arguments":{"a":1,"b":2.5}}}',
    b'{"jsonrpc":"2.0","id":"s-13","method":"ping"}',
    b'{"jsonrpc":"2.0","id":14,"method":"tools/list","params":{"cursor":null}}',
    b'{"jsonrpc":"2.0","id":15,"method":"resources/read","params":{"uri":"demo://readme"}}',
    b'{"jsonrpc":"2.0","id":16,"method":"prompts/get","params":{"name":"summarise","arguments":{"text":"x"}}}',
    b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}',
    b'[{"jsonrpc":"2.0","id":17,"method":"ping"},{"jsonrpc":"2.0","id":18,"method":"ping"}]',
    b'{"jsonrpc":"2.0","id":19,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"summarise"},"argument":{"name":"style","value":"b"}}}',
    b'{"jsonrpc":"2.0","id":20,"result":{}}',
    b'{"jsonrpc":"2.0","id":21,"method":"logging/setLevel","params":{"level":"debug"}}',
]


def _expected_ids(lines: list[bytes]) -> collections.Counter[Any]:
    """Request ids in ``lines`` (each answered once), minus any a ``notifications/cancelled`` names."""
    ids: collections.Counter[Any] = collections.Counter()
    cancelled: set[Any] = set()
    for line in lines:
        try:  # orjson's JSON, as the server's decoders take it (1e999 and 2**64 are refused: -32700)
            msg = orjson.loads(line)
        except (orjson.JSONDecodeError, RecursionError):
            continue
        if not isinstance(msg, dict) or not isinstance(msg.get("method"), str) or msg.get("jsonrpc") != "2.0":
            continue
        if msg["method"] == "notifications/cancelled":
            params = msg.get("params")
            if isinstance(params, dict):
                cancelled.add(json.dumps(params.get("requestId")))
            continue
        rid = msg.get("id")
        if (isinstance(rid, int) and not isinstance(rid, bool) and -(2**63) <= rid < 2**63) or isinstance(rid, str):
            ids[json.dumps(rid)] += 1
    for rid in cancelled:
        ids.pop(rid, None)
    return ids


def run_stdio(seconds: float, seed: int) -> Report:
    report = Report("stdio")
    rng = random.Random(seed)
    proc = _start(["--transport", "stdio"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    out = proc.stdout
    os.set_blocking(out.fileno(), False)
    pending = b""

    def send(lines: list[bytes]) -> None:
        assert proc.stdin is not None
        proc.stdin.write(b"".join(line + b"\n" for line in lines))
        proc.stdin.flush()

    def read_until(sentinel: str, deadline: float) -> list[Any] | None:
        nonlocal pending
        messages: list[Any] = []
        while True:
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                try:
                    msg = json.loads(line)
                except ValueError:
                    report.wrong_answers += 1
                    report.fail("a reply that is not JSON", line)
                    continue
                messages.append(msg)
                if isinstance(msg, dict) and msg.get("id") == sentinel and "method" not in msg:
                    return messages
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([out], [], [], left)[0]:
                return None
            chunk = out.read(1 << 20)
            if not chunk:
                return None
            pending += chunk

    try:
        send(
            [
                b'{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25",'
                b'"capabilities":{},"clientInfo":{"name":"fuzz","version":"1"}}}',
                b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
                b'{"jsonrpc":"2.0","id":"s-0","method":"ping"}',
            ]
        )
        if read_until("s-0", time.monotonic() + 30) is None:
            report.crashes += 1
            report.fail("server did not start", b"")
            return report
        report.rss_start_kb = rss_kb(proc.pid)
        end = time.monotonic() + seconds
        n = 0
        while time.monotonic() < end:
            n += 1
            batch = [mutate(rng, rng.choice(_STDIO_SEEDS)) for _ in range(rng.randrange(1, 8))]
            batch = [b.replace(b"\n", b" ") for b in batch]  # one line each (a newline would split it)
            sentinel = f"s-{n}"
            expected = _expected_ids(batch)
            report.cases += len(batch)
            report.requests += sum(expected.values())
            try:
                send([*batch, b'{"jsonrpc":"2.0","id":"%s","method":"ping"}' % sentinel.encode()])
            except BrokenPipeError:
                report.crashes += 1
                report.fail("stdin closed", b"\n".join(batch))
                return report
            messages = read_until(sentinel, time.monotonic() + ANSWER_TIMEOUT)
            if messages is None:
                if proc.poll() is not None:
                    report.crashes += 1
                    report.fail("server died", b"\n".join(batch))
                    return report
                report.hangs += 1
                report.fail("sentinel not answered", b"\n".join(batch))
                return report
            replies = [m for m in messages[:-1] if isinstance(m, dict) and "method" not in m]
            report.answers += len(replies)
            got: collections.Counter[Any] = collections.Counter(json.dumps(m.get("id")) for m in replies)
            # Every request answered; at most one answer per line (a malformed line whose id
            # the server could still read is answered with that id, so it may add one).
            others = len(batch) - sum(expected.values())
            if len(replies) > len(batch):
                report.wrong_answers += 1
                report.fail(f"{len(replies)} replies to {len(batch)} lines", b"\n".join(batch))
            for rid, count in expected.items():
                while got[rid] < count:  # a slow handler may answer after the sentinel
                    late = read_until(json.loads(rid), time.monotonic() + ANSWER_TIMEOUT)
                    if late is None:
                        break
                    got[rid] += 1
                if not count <= got[rid] <= count + others:
                    report.wrong_answers += 1
                    report.fail(f"id {rid}: {got[rid]} replies, expected {count}", b"\n".join(batch))
            if n % 100 == 0:
                report.rss_peak_kb = max(report.rss_peak_kb, rss_kb(proc.pid))
        report.rss_end_kb = rss_kb(proc.pid)
        report.rss_peak_kb = max(report.rss_peak_kb, report.rss_end_kb)
        send([b'{"jsonrpc":"2.0","id":"s-last","method":"ping"}'])
        report.alive_at_end = read_until("s-last", time.monotonic() + ANSWER_TIMEOUT) is not None
    finally:
        with_stdin = proc.stdin
        try:
            with_stdin.close()
        except BrokenPipeError:
            pass
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        out.close()
    return report


# ------------------------------------------------------------------------------- command


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=60.0, help="total run time, split between HTTP and stdio")
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--out", type=Path, default=None, help="write results.json and results.md here")
    args = parser.parse_args(argv)
    started = time.time()
    load1 = os.getloadavg()
    reports = [run_http(args.seconds * 0.6, args.seed), run_stdio(args.seconds * 0.4, args.seed + 1)]
    load2 = os.getloadavg()
    result = {
        "command": " ".join(["python", "tests/fuzz/fuzzer.py", *(argv if argv is not None else sys.argv[1:])]),
        "seed": args.seed,
        "seconds": args.seconds,
        "started_unix": int(started),
        "load_average_start": load1,
        "load_average_end": load2,
        "reports": [r.as_dict() for r in reports],
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "results.json").write_text(text + "\n")
        rows = [
            "| | cases | requests | answers | hangs | crashes | 5xx | wrong answers | RSS start KB | RSS end KB | RSS peak KB | alive |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in reports:
            rows.append(
                f"| {r.kind} | {r.cases} | {r.requests} | {r.answers} | {r.hangs} | {r.crashes} | {r.server_errors} | "
                f"{r.wrong_answers} | {r.rss_start_kb} | {r.rss_end_kb} | {r.rss_peak_kb} | {r.alive_at_end} |"
            )
        (args.out / "results.md").write_text(
            f"# make fuzz\n\nCommand: `{result['command']}` (seed {args.seed}); load average "
            f"{load1[0]:.2f} at the start, {load2[0]:.2f} at the end. HTTP ran {args.seconds * 0.6:.0f} s, stdio "
            f"{args.seconds * 0.4:.0f} s. stdio cases are lines (requests: those with an id, answered once each; "
            f"answers include the errors to malformed lines).\n\n" + "\n".join(rows) + "\n\n"
            f"HTTP statuses seen: {dict(sorted(reports[0].statuses.items()))}\n\n"
            + (
                "Failures:\n" + "\n".join(f"- `{e}`" for r in reports for e in r.examples) + "\n"
                if any(r.examples for r in reports)
                else "No failures.\n"
            )
        )
    return 0 if all(r.failures == 0 for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
