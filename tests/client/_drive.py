"""Child-interpreter driver for the adapter tests (gevent must never be imported by pytest itself).

    python _drive.py '<json spec>'

spec: ``transport`` (stdio|http), ``target`` (argv list or URL), ``version``, ``timeout``, ``ops``
(list of ``[op, ...args]``).  Prints one JSON line: every report (name, µs, length, exception repr),
the replies' raw bytes, and the session state.
"""

from __future__ import annotations

import gevent.monkey

gevent.monkey.patch_all()

import json  # noqa: E402
import sys  # noqa: E402

import gevent  # noqa: E402

from mcpfast.client.session import ClientSession  # noqa: E402


def _state() -> dict:
    """The greenlets alive and the sockets open in this process (leaks across session restarts)."""
    import gc
    import os

    greenlets = sum(1 for o in gc.get_objects() if isinstance(o, gevent.Greenlet) and not o.dead)
    fds = [os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd") if os.path.exists(f"/proc/self/fd/{fd}")]
    return {"greenlets": greenlets, "sockets": sum(1 for target in fds if target.startswith("socket:"))}


def main() -> None:
    spec = json.loads(sys.argv[1])
    records: list = []

    def reporter(name, us, length, exc):
        records.append([name, us, length, repr(exc) if exc is not None else None])

    kw = {"reporter": reporter, "timeout": spec.get("timeout", 5.0)}
    session = ClientSession(
        spec.get("version", "2025-11-25"), capabilities=spec.get("capabilities"), server_replies=spec.get("server_replies")
    )
    if spec["transport"] == "stdio":
        from mcpfast.client.stdio import StdioClient

        client = StdioClient(spec["target"], session, **kw)
    elif spec["transport"] == "legacy_sse":
        from mcpfast.client.legacy_sse import LegacySseClient

        client = LegacySseClient(spec["target"], session, token=spec.get("token"), **kw)
    else:
        from mcpfast.client.http import HttpClient

        client = HttpClient(spec["target"], session, token=spec.get("token"), **kw)
    replies: list = []
    out: dict = {"records": records, "replies": replies}
    for op, *args in spec["ops"]:
        if op == "initialize":
            out.setdefault("initialized", []).append(client.initialize())
            out["session_id"] = session.session_id
        elif op == "tool":
            r = client.call_tool(args[0], args[1] if len(args) > 1 else {})
            replies.append(r.raw.decode() if r is not None else None)
        elif op == "stream":
            r = client.call_tool("stream", {"n": args[0]}, stream=True)
            replies.append(r.raw.decode() if r is not None else None)
            out["progress"] = len(r.progress) if r is not None else None
        elif op == "concurrent":
            gs = [gevent.spawn(client.call_tool, "echo", {"text": f"t{i}"}) for i in range(args[0])]
            gevent.joinall(gs, timeout=20)
            texts = [json.loads(g.value.raw)["result"]["content"][0]["text"] for g in gs if g.value is not None]
            out["concurrent"] = texts
        elif op == "call":
            r = client.call(args[0], args[1] if len(args) > 1 else None)
            replies.append(r.raw.decode() if r is not None else None)
        elif op == "delete":
            out["deleted"] = client.delete()
        elif op == "get_stream":
            client.open_get_stream(args[0]).wait(args[0] + 2)
            out["get_status"] = client.get_stream_status
        elif op == "listen":
            out["listen"] = client.listen(args[0])
        elif op == "hold":
            client.hold_stream()
        elif op == "sleep":
            gevent.sleep(args[0])
        elif op == "state":
            out.setdefault("states", []).append(_state())
        elif op == "restart":
            client.restart()
        elif op == "sse_url":
            from mcpfast.client.legacy_sse import sse_url_for

            out.setdefault("sse_urls", []).append(sse_url_for(args[0]))
        elif op == "close":
            client.close()
            out["returncode"] = None
    out["endpoint"] = getattr(client, "endpoint_path", None)
    out.update(
        era=session.era, version=session.version, server_requests=session.server_requests, server_capabilities=session.server_capabilities
    )
    if spec["transport"] == "stdio":
        proc = client.proc
        client.close()
        out["returncode"] = proc.returncode if proc is not None else out.get("returncode")
        out["stderr_tail"] = client.stderr_tail.decode(errors="replace")[-200:]
    else:
        client.close()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
