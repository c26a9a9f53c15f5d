"""Held GET streams on the native engine: ``loadtests/hold.py`` against ``mcpfast serve`` with the
broadcast tool, the generator's CPU per thread.

The server (``loadtests/_broadcast_server.py``: the demo app + ``broadcast``) runs on CPU 0, the
whole Locust tree (``--processes N``: master and workers) on CPU 1. While Locust runs, every
thread of every process of its tree is read from ``/proc/<pid>/task/*/stat`` once a second
(user + system ticks), so the busiest thread's share of a core is known per second; the phase
with every stream held starts at the ``all_held_after_s`` of ``<name>_hold.json``. Writes
Locust's CSVs and histograms, ``<name>_hold.json``, and ``<name>_threads.json`` (per thread: name,
process, CPU seconds, its largest one-second share; the busiest thread's share per second).

    flock /tmp/mcpfast-bench.lock python -m benchmarks.hold_native --users 100 --per-user 100 --name one
    flock /tmp/mcpfast-bench.lock python -m benchmarks.hold_native --users 100 --per-user 100 --processes 2 --name two
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import CLOCK_TICKS, GENERATOR_CPU, ROOT, SERVER_CPU, Record, pinned, results_dir, write
from mcpfast.bench.procs import child_env, free_port, stop_process, wait_port
from mcpfast.client.probe import process_tree


def thread_ticks(pids: list[int]) -> dict[tuple[int, int], tuple[str, int]]:
    """``{(pid, tid): (thread name, user + system ticks)}`` of every thread of ``pids``."""
    out: dict[tuple[int, int], tuple[str, int]] = {}
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/stat", "rb") as fh:
                    raw = fh.read()
            except OSError:
                continue
            name = raw[raw.index(b"(") + 1 : raw.rindex(b")")].decode(errors="replace")
            fields = raw.rsplit(b")", 1)[1].split()
            out[(pid, int(tid))] = (name, int(fields[11]) + int(fields[12]))
    return out


def sample(root: int, proc: subprocess.Popen[Any], interval: float = 1.0) -> dict[str, Any]:
    """Per-thread CPU of ``root``'s tree once per ``interval`` until ``proc`` ends."""
    start = time.monotonic()
    last = thread_ticks(process_tree(root))
    first = dict(last)
    seconds: list[dict[str, Any]] = []
    peak: dict[tuple[int, int], float] = {}
    while proc.poll() is None:
        time.sleep(interval)
        now = thread_ticks(process_tree(root))
        shares = {k: (ticks - last.get(k, (name, 0))[1]) / CLOCK_TICKS / interval for k, (name, ticks) in now.items()}
        for k, v in shares.items():
            peak[k] = max(peak.get(k, 0.0), v)
            first.setdefault(k, (now[k][0], 0))
        if shares:
            k = max(shares, key=lambda key: shares[key])
            seconds.append({"t": round(time.monotonic() - start, 1), "busiest": now[k][0], "pid": k[0], "share": round(shares[k], 3)})
        last = {**last, **now}
    threads: list[dict[str, Any]] = [
        {
            "pid": k[0],
            "tid": k[1],
            "name": name,
            "cpu_s": round((last[k][1] - first[k][1]) / CLOCK_TICKS, 2),
            "peak_share": round(peak.get(k, 0.0), 3),
        }
        for k, (name, _ticks) in last.items()
    ]
    threads.sort(key=lambda t: -t["cpu_s"])
    return {"interval_s": interval, "threads": threads, "per_second": seconds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.hold_native", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--per-user", type=int, default=100, help="GET streams per user")
    parser.add_argument("--processes", type=int, default=1, help="Locust processes (>1: --processes N, master + N workers)")
    parser.add_argument("--seconds", type=int, default=70, help="Locust's --run-time")
    parser.add_argument("--every", type=float, default=5.0, help="seconds between fan-out triggers")
    parser.add_argument("--engine", default="native", choices=("native", "python"))
    parser.add_argument("--name", default="run")
    parser.add_argument("--out", default=str(results_dir("swarm/hold-native")))
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    record = Record("hold_native", argv, lock=True)
    streams = args.users * args.per_user
    port = free_port()
    serve = [
        args.python,
        str(ROOT / "loadtests" / "_broadcast_server.py"),
        "--transport",
        "http",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    # room for the trigger's and the check's sessions, and the users' POST connections while they open
    serve += ["--max-sessions", str(streams + 100), "--max-connections", str(streams + args.users + 100)]
    env = child_env()
    with open(out / f"{args.name}_server.log", "w") as server_log:
        server = subprocess.Popen(pinned(serve, SERVER_CPU), stdout=server_log, stderr=subprocess.STDOUT, env=env)
    try:
        wait_port(port, server)
        prefix = out / args.name
        cmd = [args.python, "-m", "locust", "-f", str(ROOT / "loadtests" / "hold.py"), "--headless", "--only-summary"]
        cmd += ["-u", str(args.users), "-r", str(args.users), "-t", f"{args.seconds}s", "--stop-timeout", "5", "--csv", str(prefix)]
        cmd += ["--host", f"http://127.0.0.1:{port}/mcp", "--mcp-engine", args.engine, "--mcp-hold-per-user", str(args.per_user)]
        cmd += ["--mcp-hold-trigger", "broadcast", "--mcp-hold-trigger-every", str(args.every), "--mcp-server-pid", str(server.pid)]
        cmd += ["--mcp-timeout", "120"]
        if args.processes > 1:
            cmd += ["--processes", str(args.processes)]
        with open(out / f"{args.name}_locust.log", "w") as log:
            locust = subprocess.Popen(pinned(cmd, GENERATOR_CPU), stdout=log, stderr=subprocess.STDOUT, env=env, cwd=out)
            threads = sample(locust.pid, locust)
        code = locust.returncode
    finally:
        stop_process(server)
    hold = json.loads((out / f"{args.name}_hold.json").read_text())
    held_at = hold.get("all_held_after_s")
    holding = [s for s in threads["per_second"] if held_at is not None and s["t"] > held_at + 3.0]
    data = record.finish(
        locust_exit_code=code,
        locust_command=cmd,
        hold=hold,
        busiest_share_while_held=max((s["share"] for s in holding), default=None),
        busiest_share_opening=max((s["share"] for s in threads["per_second"] if held_at is None or s["t"] <= held_at + 3.0), default=None),
        **threads,
    )
    write(out, f"{args.name}_threads", data)
    top = threads["threads"][:4]
    print(
        json.dumps(
            {
                "exit": code,
                "hold": hold,
                "busiest_while_held": data["busiest_share_while_held"],
                "busiest_opening": data["busiest_share_opening"],
                "top": top,
            }
        )
    )
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
