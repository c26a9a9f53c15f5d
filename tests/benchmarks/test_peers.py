"""The peer servers of ``make bench-peers`` (``benchmarks.peer_servers``) and the runner
(``python -m benchmarks.peers``).

Every peer (mcpfast, the official Python SDK, the official TypeScript SDK) serves the same demo
app: checked over Streamable HTTP (both reply modes of the SDKs) and over stdio with a small
stdlib client (initialize, tools/list, echo, add, stream with its progress notifications, the
resource, the prompt, DELETE).  Then one short run of the runner over every server, transport and
family (about a minute) must give non-zero numbers and ratios for every scenario, the table and
the plots.  ``make test`` installs the TypeScript SDK first (``make peers-install``).
"""

from __future__ import annotations

import http.client
import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from _support import child_env, stdio_start_seconds

from benchmarks import peers as runner
from benchmarks.harness import pinned
from benchmarks.peer_servers import PEERS, peer_versions, start_http

ROOT = Path(__file__).resolve().parents[2]
PNG = b"\x89PNG\r\n\x1a\n"
PROTOCOL = "2025-11-25"
FAMILIES = ("handshake", "tools_call", "sse_streaming", "session_churn")
CPU = str(min(os.sched_getaffinity(0)))

INIT = {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "peer-test", "version": "1"}}


def _request(rid: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


# ------------------------------------------------------------------------------- HTTP client


class Http:
    """One MCP session over Streamable HTTP (JSON or SSE replies), stdlib only."""

    def __init__(self, host: str, port: int) -> None:
        self.conn = http.client.HTTPConnection(host, port, timeout=10)
        self.sid: str | None = None

    def _headers(self) -> dict[str, str]:
        h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if self.sid:
            h.update({"mcp-session-id": self.sid, "mcp-protocol-version": PROTOCOL})
        return h

    def post(self, msg: dict[str, Any]) -> tuple[int, str, list[dict[str, Any]]]:
        """(status, content type, the JSON-RPC messages of the reply in order)."""
        self.conn.request("POST", "/mcp", body=json.dumps(msg), headers=self._headers())
        resp = self.conn.getresponse()
        body = resp.read().decode()
        ctype = (resp.getheader("content-type") or "").split(";")[0].strip()
        if msg.get("method") == "initialize" and resp.getheader("mcp-session-id"):
            self.sid = resp.getheader("mcp-session-id")
        if ctype == "text/event-stream":
            events = [line[5:].strip() for line in body.splitlines() if line.startswith("data:")]
            return resp.status, ctype, [json.loads(e) for e in events if e]
        return resp.status, ctype, [json.loads(body)] if body.strip() else []

    def close(self) -> None:
        self.conn.close()

    def delete(self) -> int:
        self.conn.request("DELETE", "/mcp", headers=self._headers())
        resp = self.conn.getresponse()
        resp.read()
        return resp.status


def _result(messages: list[dict[str, Any]], rid: int) -> dict[str, Any]:
    replies = [m for m in messages if m.get("id") == rid]
    assert len(replies) == 1 and "result" in replies[0], messages
    return replies[0]["result"]


def _progress(messages: list[dict[str, Any]], token: str) -> list[dict[str, Any]]:
    return [m["params"] for m in messages if m.get("method") == "notifications/progress" and m["params"]["progressToken"] == token]


def _check_demo_app(call: Any) -> None:
    """The demo app behind ``call(message) -> messages``: tools, results, stream, resource, prompt."""
    tools = {t["name"]: t for t in _result(call(_request(2, "tools/list")), 2)["tools"]}
    assert {"echo", "add", "stream"} <= set(tools)
    assert tools["echo"]["inputSchema"]["properties"]["text"]["type"] == "string"
    assert tools["echo"]["inputSchema"]["required"] == ["text"]
    assert set(tools["add"]["inputSchema"]["properties"]) == {"a", "b"}
    assert set(tools["stream"]["inputSchema"]["properties"]) == {"n", "delay"}
    echo = _result(call(_request(3, "tools/call", {"name": "echo", "arguments": {"text": "héllo peers"}})), 3)
    assert echo["content"] == [{"type": "text", "text": "héllo peers"}] and not echo.get("isError")
    add = _result(call(_request(4, "tools/call", {"name": "add", "arguments": {"a": 1.5, "b": 2}})), 4)
    assert add["structuredContent"] == {"sum": 3.5} and json.loads(add["content"][0]["text"]) == {"sum": 3.5}
    resources = _result(call(_request(6, "resources/list")), 6)["resources"]
    assert [r["uri"] for r in resources] == ["demo://readme"]
    text = _result(call(_request(7, "resources/read", {"uri": "demo://readme"})), 7)["contents"][0]["text"]
    assert text == "# mcpfast demo\n\nTools: echo, add, stream.\n"
    prompt = _result(call(_request(8, "prompts/get", {"name": "summarise", "arguments": {"text": "abc"}})), 8)
    assert prompt["messages"][0]["content"]["text"] == "Summarise this text (brief):\n\nabc"


def _stream_call(rid: int, token: str, n: int) -> dict[str, Any]:
    return _request(rid, "tools/call", {"name": "stream", "arguments": {"n": n}, "_meta": {"progressToken": token}})


@pytest.mark.parametrize("name", list(PEERS))
@pytest.mark.timeout(60)
def test_peer_serves_the_demo_app_over_http(name: str, tmp_path: Path) -> None:
    with start_http(name, cpus=CPU, log_path=tmp_path / "server.log") as server:
        assert server.url.startswith("http://127.0.0.1:") and server.url.endswith("/mcp")
        assert server.argv[:3] == pinned([], CPU) and server.proc.poll() is None
        assert server.reply_mode == ("json+sse" if name == "mcpfast" else "sse")
        client = Http(server.host, server.port)
        status, _ctype, messages = client.post(_request(1, "initialize", INIT))
        assert status == 200 and _result(messages, 1)["protocolVersion"] == PROTOCOL and client.sid
        assert client.post({"jsonrpc": "2.0", "method": "notifications/initialized"})[0] == 202

        def call(msg: dict[str, Any]) -> list[dict[str, Any]]:
            status, _ctype, messages = client.post(msg)
            assert status == 200, messages
            return messages

        _check_demo_app(call)
        status, ctype, messages = client.post(_stream_call(5, "tok-5", 4))
        assert status == 200 and ctype == "text/event-stream"  # the progress needs a stream
        steps = _progress(messages, "tok-5")
        assert [(p["progress"], p["total"], p["message"]) for p in steps] == [(i, 4, f"step {i} of 4") for i in range(1, 5)]
        assert messages[-1]["id"] == 5 and messages[-1]["result"]["content"][0]["text"] == "streamed 4 steps"
        assert 200 <= client.delete() < 300
        assert client.post(_request(9, "tools/list"))[0] == 404  # the session is gone
        client.close()
    assert server.proc.poll() is not None


@pytest.mark.parametrize("name", [n for n in PEERS if n != "mcpfast"])
@pytest.mark.timeout(60)
def test_sdk_peer_json_mode_answers_json_and_drops_progress(name: str) -> None:
    with start_http(name, json_response=True) as server:
        assert server.reply_mode == "json"
        client = Http(server.host, server.port)
        status, ctype, messages = client.post(_request(1, "initialize", INIT))
        assert (status, ctype) == (200, "application/json") and client.sid
        client.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        status, ctype, messages = client.post(_request(3, "tools/call", {"name": "echo", "arguments": {"text": "hi"}}))
        assert (status, ctype) == (200, "application/json") and _result(messages, 3)["content"][0]["text"] == "hi"
        # the reason sse_streaming runs the SDKs in SSE mode: JSON has no room for the notifications
        status, ctype, messages = client.post(_stream_call(5, "tok", 3))
        assert (status, ctype) == (200, "application/json") and _progress(messages, "tok") == []
        assert _result(messages, 5)["content"][0]["text"] == "streamed 3 steps"
        assert 200 <= client.delete() < 300
        client.close()


# ------------------------------------------------------------------------------ stdio client


class Stdio:
    def __init__(self, argv: list[str]) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     cwd=ROOT, env=env)  # fmt: skip
        self.buf = b""

    def send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        self.proc.stdin.flush()

    def until_reply(self, rid: int, timeout: float = 20.0) -> list[dict[str, Any]]:
        """Every message up to and including the reply to ``rid``."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        out: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                if line.strip():
                    out.append(json.loads(line))
                    if out[-1].get("id") == rid and "method" not in out[-1]:
                        return out
            ready, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0.0))
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                self.buf += chunk
        raise AssertionError(f"no reply to {rid} (got {out})")

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
            raise
        finally:
            if self.proc.stdout is not None:
                self.proc.stdout.close()


@pytest.mark.parametrize("name", list(PEERS))
@pytest.mark.timeout(60)
def test_peer_serves_the_demo_app_over_stdio(name: str) -> None:
    command = PEERS[name].stdio_command(CPU)
    assert command.split()[1:3] == ["-c", CPU] and "--transport stdio" in command
    client = Stdio(PEERS[name].stdio_argv())
    try:
        client.send(_request(1, "initialize", INIT))
        assert _result(client.until_reply(1), 1)["protocolVersion"] == PROTOCOL
        client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

        def call(msg: dict[str, Any]) -> list[dict[str, Any]]:
            client.send(msg)
            return client.until_reply(msg["id"])

        _check_demo_app(call)
        messages = call(_stream_call(5, "tok-stdio", 3))
        assert [p["message"] for p in _progress(messages, "tok-stdio")] == ["step 1 of 3", "step 2 of 3", "step 3 of 3"]
        assert _result(messages, 5)["content"][0]["text"] == "streamed 3 steps"
    finally:
        code = client.close()
    assert code == 0  # stdin closed: the server ends by itself


def test_peer_versions_and_cpu_lists() -> None:
    v = peer_versions()
    for key in ("mcpfast", "python", "mcp", "@modelcontextprotocol/sdk", "zod", "node"):
        assert v[key], key
    lock = json.loads((ROOT / "peers/typescript/package-lock.json").read_text())
    pinned_sdk = json.loads((ROOT / "peers/typescript/package.json").read_text())["dependencies"]["@modelcontextprotocol/sdk"]
    assert v["@modelcontextprotocol/sdk"] == pinned_sdk == lock["packages"]["node_modules/@modelcontextprotocol/sdk"]["version"]
    assert runner.parse_cpus("1") == {1} and runner.parse_cpus("0,2-3") == {0, 2, 3}
    for bad in ("", "a", "3-1", "-1"):
        with pytest.raises(ValueError):
            runner.parse_cpus(bad)


# ------------------------------------------------------------------------------------ runner


def test_steady_rate_starts_when_every_session_is_up(tmp_path: Path) -> None:
    path = tmp_path / "h_stats_history.csv"
    rows = ["Timestamp,User Count,Type,Name,Requests/s,Total Request Count"]
    # 2 users: the first session is up at t=101, the second at t=103; calls flow from t=102
    for t, init, calls in ((100, 0, None), (101, 1, None), (102, 1, 5), (103, 2, 9), (104, 2, 29), (105, 2, 49)):
        rows.append(f"{t},2,mcp-stdio,initialize,0,{init}")
        if calls is not None:
            rows.append(f"{t},2,mcp-stdio,tools/call:echo,0,{calls}")
    path.write_text("\n".join(rows) + "\n")
    assert runner.steady_rate(path, "tools/call:echo", 2) == {"rps": 20.0, "from_s": 103.0, "to_s": 105.0, "count": 40}
    assert runner.steady_rate(path, "tools/call:echo", 3) is None  # never every session
    assert runner.steady_rate(path, "tools/call:stream", 2) is None  # no such request
    assert runner.steady_rate(tmp_path / "missing.csv", "tools/call:echo", 2) is None


@pytest.mark.slow
@pytest.mark.timeout(480)
def test_runner_writes_numbers_ratios_table_and_plots_for_every_scenario(tmp_path: Path) -> None:
    """Two families of the four, one of each kind (the calls over open sessions, judged from when
    they are all up, and the session cycles, judged over the run), on both transports against all
    three servers: every scenario run has its numbers, ratios, table row and plot."""
    out = tmp_path / "peers"
    families = ("sse_streaming", "session_churn")
    pin = [] if len(os.sched_getaffinity(0)) >= 2 and {0, 1} <= os.sched_getaffinity(0) else ["--no-pin"]
    # 1 user; over stdio long enough for the Python SDK's process start to fit three times: about
    # 1 s on an idle machine, several on a busy one (a fixed 3.5 s left its rows without requests)
    stdio_s = min(max(3.5, 3 * stdio_start_seconds(PEERS["python-sdk"].stdio_argv(), cwd=ROOT, env=child_env()) + 1), 12.0)
    argv = [sys.executable, "-m", "benchmarks.peers", "--out", str(out), "--duration", "1", "--stdio-duration", f"{stdio_s:.1f}",
            "--users", "1", "--no-server-plots", *(a for f in families for a in ("--family", f)), *pin]  # fmt: skip
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=160 + 16 * stdio_s, cwd=ROOT, env=env)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ok"] is True and summary["problems"] == [], summary["problems"]
    assert summary["format"] == "mcpfast-peers" and summary["config"]["servers"] == list(PEERS)
    scenarios = summary["scenarios"]
    assert [(s["family"], s["transport"]) for s in scenarios] == [(f, t) for t in ("http", "stdio") for f in FAMILIES if f in families]
    for sc in scenarios:
        for name in PEERS:
            d = sc["servers"][name]
            assert d["status"] == "ok" and d["request"] == sc["request"], (sc["family"], sc["transport"], name, d)
            assert d["count"] > 0 and d["failures"] == 0 and d["rps"] > 0 and 0 < d["p50_us"] <= d["p99_us"], d
            assert d["rps_run"] > 0
            if sc["family"] in ("handshake", "session_churn"):
                assert (d["rps_basis"], d["rps"]) == ("run", d["rps_run"])
            else:
                assert d["rps_basis"] in ("sessions up", "run (sessions never all up)")
        for name in ("python-sdk", "typescript-sdk"):
            ratio = sc["ratios"][name]
            mine, theirs = sc["servers"]["mcpfast"], sc["servers"][name]
            assert ratio["rps"] == pytest.approx(mine["rps"] / theirs["rps"], rel=1e-3)
            assert ratio["p50"] == pytest.approx(mine["p50_us"] / theirs["p50_us"], rel=1e-3)
            assert ratio["p99"] == pytest.approx(mine["p99_us"] / theirs["p99_us"], rel=1e-3)
    requests = {(s["family"], s["transport"]): s["request"] for s in scenarios}
    assert requests[("sse_streaming", "http")] == requests[("sse_streaming", "stdio")] == "tools/call:stream"
    assert requests[("session_churn", "http")] == requests[("session_churn", "stdio")] == "initialize"
    # the SDKs answer JSON where nothing streams and SSE in sse_streaming; pinned servers
    modes = {(r["server"], r["family"]): r["reply_mode"] for r in summary["runs"] if r["transport"] == "http"}
    assert modes[("python-sdk", "session_churn")] == modes[("typescript-sdk", "session_churn")] == "json"
    assert modes[("typescript-sdk", "sse_streaming")] == "sse" and modes[("mcpfast", "session_churn")] == "json+sse"
    if not pin:
        assert all(" -c 0 " in r["server_argv"] for r in summary["runs"]) and summary["config"]["generator_cpus"] == "1"
    assert all(r["locust_argv"] and "-m locust" in r["locust_argv"] for r in summary["runs"])
    # versions and machine
    for key in ("mcp", "@modelcontextprotocol/sdk", "mcpfast", "node"):
        assert summary["versions"][key]
    assert summary["machine"]["locust_version"] and summary["machine"]["cpu_model"] and summary["machine"]["mem_total_kib"]
    # the table
    readme = (out / "README.md").read_text()
    assert "| scenario | request | rps ÷ python-sdk |" in readme and "rps ÷ typescript-sdk" in readme
    for sc in scenarios:
        assert f"| {sc['family']}/{sc['transport']} | `{sc['request']}` |" in readme
    assert "@modelcontextprotocol/sdk 1." in readme and "taskset" in readme and "python -m benchmarks.peers" in readme
    assert "sse_streaming/http" in proc.stdout and "rps÷ python-sdk" in proc.stdout
    # the plots, and every server directory is a normal bench run
    expected = {"throughput.png", "ratios.png"} | {f"latency-{f}-{t}.png" for f in families for t in ("http", "stdio")}
    assert set(summary["plots"]) == expected
    for png in expected:
        data = (out / png).read_bytes()
        assert data.startswith(PNG) and len(data) > 1000, png
    from mcpfast.results.files import load_summary

    for name in PEERS:
        per = load_summary(out / name)
        assert len(per["families"]) == 4 and per["ok"] and per["plots"] == []  # --no-server-plots
        assert {f["family"] for f in per["families"]} == set(families) and per["rows"]
