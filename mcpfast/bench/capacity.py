"""``mcpfast capacity``: the capacity search (the Locust shape ``shapes/capacity.py``, which does
the searching) run as one ``locust`` subprocess against the embedded reference server or a
target; this module only launches it, echoes its progress, reads the ``capacity.json`` it
writes and has the curve and ``report.html`` drawn (:func:`mcpfast.results.report.redraw_capacity`;
``docs/capacity.md``)."""

from __future__ import annotations

import argparse
import datetime as _dt
import shlex
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, TextIO

from mcpfast.bench.procs import ServerProcess, child_env, free_port, log_path, log_tail, reference_server, stop_process
from mcpfast.locust.argtypes import finite_positive, int_at_least, rate
from mcpfast.locust.capacity import SearchSettings
from mcpfast.locust.locustfiles import LOCUSTFILES, families
from mcpfast.locust.thresholds import argument_type
from mcpfast.results import files
from mcpfast.results.report import redraw_capacity

__all__ = ["add_parser", "run"]

SHAPE = LOCUSTFILES.parent / "shapes" / "capacity.py"
PROGRESS = "mcpfast capacity: "
STOP_GRACE_S = 60.0  # past --max-time (and the shape's wait for a late step) before locust is stopped
# the search's bounds: the flag (the shape's --mcp-capacity-<flag>), its SearchSettings field, type, metavar, help
SEARCH = (
    ("start", "start", finite_positive, "R", "the first step's rate per second"),
    ("max-rate", "max_rate", finite_positive, "R", "never offer more than this rate per second"),
    ("resolution", "resolution", finite_positive, "SHARE", "bisect until first bad is within this share of last good"),
    ("warmup", "warmup_s", rate, "S", "seconds of each step discarded"),
    ("steady", "steady_s", finite_positive, "S", "seconds of each step judged"),
    ("max-time", "max_time_s", finite_positive, "S", "bound in seconds on the whole search"),
)
# options handed to the swarm as they are: the flag here, the swarm's
PASSED = (("processes", "--processes"), ("engine", "--mcp-engine"), ("engine_threads", "--mcp-engine-threads"), ("tool", "--mcp-tool"),
          ("tool_args", "--mcp-tool-args"), ("protocol_version", "--mcp-protocol-version"))  # fmt: skip


def add_parser(subparsers: Any) -> None:
    """Register ``capacity`` on an ``add_subparsers()`` object."""
    p = subparsers.add_parser(
        "capacity",
        help="find the highest open-model rate a server holds within an SLO; capacity.json and the curve",
        description="Doubling then bisection over open-model rates, each step a warm-up and a judged steady window "
        "(one locust subprocess running shapes/capacity.py beside the family's locustfile). Exit code: 0 a capacity, "
        "'at least' or a bracket; 1 below the first step, the server exited, or locust failed; 2 bad input; "
        "3 inconclusive (the generator was the limit). docs/capacity.md explains the curve and the verdicts.",
    )
    target = p.add_argument_group("target (default: the embedded reference server, `mcpfast serve --transport http --metrics`)")
    one = target.add_mutually_exclusive_group()
    one.add_argument("--target", metavar="URL", help="Streamable HTTP endpoint to search")
    one.add_argument("--target-command", metavar="COMMAND", help="stdio server command (a server per session; its CPU is not read)")
    target.add_argument("--server-pid", type=int_at_least(0), default=0, metavar="PID", help="with --target: its pid (CPU and RSS)")
    work = p.add_mutually_exclusive_group()
    work.add_argument("--family", metavar="NAME", help="the workload: tools_call (default), handshake, session_churn, mixed, sse_streaming")
    work.add_argument("--mcp-scenario", metavar="FILE", help="a workload file (loadtests/scenario.py) instead of a family")
    p.add_argument("--slo", action="append", required=True, type=argument_type, metavar="EXPR",
                   help="the SLO every step is held to, repeatable ('tools/call:echo p99 < 5ms', 'fail%% < 0.1')")  # fmt: skip
    search, defaults = p.add_argument_group("the search"), SearchSettings()
    for flag, field, kind, metavar, text in SEARCH:
        search.add_argument(f"--{flag}", dest=field, type=kind, metavar=metavar, help=f"{text} (default {getattr(defaults, field):,.10g})")
    search.add_argument("--stop-on-failure", action="store_true", help="end at the first failed step (a deployed server)")
    gen = p.add_argument_group("the generator")
    gen.add_argument("--processes", type=int_at_least(1), metavar="N", help="Locust processes (locust --processes; default 1)")
    gen.add_argument("--engine", choices=("native", "python"), help="the swarm's engine (default native when built)")
    gen.add_argument("--engine-threads", type=int_at_least(1), metavar="N", help="native engine I/O threads per process (default 1)")
    gen.add_argument("--tool", metavar="NAME", help="the tool tools/call calls (default echo)")
    gen.add_argument("--tool-args", metavar="JSON", help="its arguments, a JSON object")
    gen.add_argument("--protocol-version", metavar="VERSION", help="MCP revision the swarm speaks")
    gen.add_argument("--locust-arg", action="append", default=[], metavar="ARG", help="extra locust argument (repeatable)")
    p.add_argument("--out", metavar="DIR", help="result directory (default bench_results/capacity-<UTC timestamp>)")
    p.add_argument("--no-plots", action="store_true", help="skip capacity.png (`mcpfast report DIR` draws it later)")


def locust_argv(args: argparse.Namespace, out: Path, host: str | None, server_pid: int) -> list[str]:
    """The locust command of a search: the family's locustfile and the shape, headless."""
    family = "scenario" if args.mcp_scenario else (args.family or "tools_call")
    argv = [sys.executable, "-m", "locust", "-f", f"{LOCUSTFILES / family}.py,{SHAPE}", "--headless", "--only-summary"]
    argv += ["--loglevel", "INFO", "--mcp-capacity-out", str(out), *(a for slo in args.slo for a in ("--mcp-slo", slo))]
    argv += ["--mcp-histogram-out", str(out / "capacity"), "--mcp-no-report"]  # the search's µs histograms; one page, report.html
    argv += ["--mcp-command", args.target_command] if args.target_command else ["--host", host or ""]
    argv += ["--mcp-server-pid", str(server_pid)] if server_pid else []
    argv += [
        a
        for flag, field, *_ in SEARCH
        if getattr(args, field) is not None
        for a in (f"--mcp-capacity-{flag}", f"{getattr(args, field):.10g}")
    ]
    argv += ["--mcp-capacity-stop-on-failure"] if args.stop_on_failure else []
    argv += [a for name, option in PASSED if getattr(args, name) is not None for a in (option, str(getattr(args, name)))]
    argv += ["--mcp-scenario", str(Path(args.mcp_scenario).resolve())] if args.mcp_scenario else []
    if args.processes:  # a free port, not Locust's 5557: another run's master there would take these workers
        argv += [option for port in [str(free_port())] for option in ("--master-bind-port", port, "--master-port", port)]
    return argv + list(args.locust_arg)


def _echo(stream: Any, log: TextIO, err: TextIO) -> None:
    """Copy locust's output to its log; its progress lines (logged, so not at a line's start:
    the sentence the shape prints bare at the end is printed from capacity.json) to ``err``."""
    for line in stream:
        log.write(line)
        log.flush()
        at = line.find(PROGRESS)
        if at > 0:
            err.write(line[at:])
            err.flush()


def run(args: argparse.Namespace, out_stream: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run the search; print its sentence and files; return locust's exit code (see the help)."""
    out_s, err_s = out_stream or sys.stdout, err or sys.stderr
    try:  # the search's bounds as the shape will check them, before anything starts
        settings = SearchSettings(**{f: getattr(args, f) for _, f, *_ in SEARCH if getattr(args, f) is not None}).check()
        if args.family and args.family not in families():
            raise ValueError(f"no locustfile {args.family!r} (the families: {', '.join(families())})")
    except ValueError as exc:
        err_s.write(f"mcpfast capacity: {exc}\n")
        return 2
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%d-%H%M%S")
    out = (Path(args.out) if args.out else Path("bench_results") / f"capacity-{stamp}").resolve()
    out.mkdir(parents=True, exist_ok=True)
    (out / "capacity.json").unlink(missing_ok=True)  # what is read at the end is this search's
    server: ServerProcess | None = None
    host, pid = args.target, args.server_pid
    if not args.target and not args.target_command:
        server = reference_server(sys.executable, log_path(out, "server.log"), "--metrics")
        try:
            server.start()
        except RuntimeError as exc:
            err_s.write(f"mcpfast capacity: the embedded server did not start: {exc}\n")
            return 1
        host, pid = server.url, server.pid
        err_s.write(f"mcpfast capacity: embedded server pid {pid} at {host}\n")
    argv = locust_argv(args, out, host, pid)
    (out / "command.txt").write_text(f"mcpfast {shlex.join(sys.argv[1:])}\n# locust: {shlex.join(argv)}\n", encoding="utf-8")
    log_file = log_path(out, "locust.log")
    try:
        with open(log_file, "w", encoding="utf-8") as log:
            log.write("$ " + shlex.join(argv) + "\n")
            log.flush()
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, cwd=str(out), env=child_env())  # fmt: skip
            reader = threading.Thread(target=_echo, args=(proc.stdout, log, err_s), daemon=True)
            reader.start()
            try:
                code = proc.wait(timeout=settings.max_time_s + STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                err_s.write(f"mcpfast capacity: locust still ran {settings.max_time_s + STOP_GRACE_S:g} s in: stopped\n")
                code = stop_process(proc) or 1
            finally:  # Ctrl-C or any error: locust (and its stdio servers) must not outlive us
                stop_process(proc)
                reader.join(timeout=5.0)
    finally:
        if server is not None:
            server.stop()
    result = files.read_json(out / "capacity.json")
    if not isinstance(result, dict):
        why = "refused the input" if code == 2 else f"ended with code {code} before the search did"
        said = [line for line in log_tail(log_file, 200).splitlines() if "error" in line.lower()][-3:]  # else its last lines
        err_s.write(f"mcpfast capacity: locust {why} (log {log_file}):\n{chr(10).join(said) or log_tail(log_file, 8)}\n")
        return 2 if code == 2 else 1
    written = [out / "command.txt", out / "capacity.json", out / "capacity.csv", log_file, *([server.log_path] if server else [])]
    written += redraw_capacity(out, result, plots_too=not args.no_plots)
    out_s.write(f"mcpfast capacity: {result['sentence']}\n")
    if args.target_command:
        out_s.write("server CPU and memory: not known over stdio (each session's server is a child of the locust process)\n")
    elif not result.get("server_pid") and not result.get("server_metrics"):
        out_s.write("server CPU and memory: not known (no --server-pid, and no /metrics beside the target)\n")
    out_s.write("".join(f"  {p}\n" for p in written))
    return code if code in (0, 1, 2, 3) else 1
