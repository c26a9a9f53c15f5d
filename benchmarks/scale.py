"""``python -m benchmarks.scale``: what sharing sessions through Redis costs the server.

Two ``mcpfast serve --transport http`` (the demo app, native runner), one with ``--store memory``
and one with ``--store redis://…`` (a ``redis-server`` started for the run, no persistence,
pinned to core 1 with the generator), both pinned to core 0 and both up for the whole round.
``mcpfast-load`` (core 1) then measures them in turn, burst by burst in ABBA order
(``--pairs`` pairs of short bursts per round, ``--rounds`` rounds, each with fresh servers), so
whatever else the shared machine does in a moment hits both stores alike
(``benchmarks.harness.alternate``):

* **calls**: ``tools/call echo`` from 32 sessions, one in flight each, JSON replies;
* **handshakes**: ``initialize`` + ``initialized`` + ``DELETE`` on 32 connections.

A burst's figure is the server's CPU µs per call or per handshake (``/proc/PID/stat`` around
the measured window, read by the generator); a pair's ratio is Redis / memory; a round's ratio
is the median of its pairs', the result the median of the rounds'. Also recorded: Redis's CPU,
and the Redis commands and script calls per operation (Redis's own ``INFO`` deltas over the
Redis bursts: an independent count). Then ``--workers 2`` against ``--workers 1`` (both on the
Redis store, unpinned: two workers need both cores, which the generator shares). Output:
``--out`` (``bench_results/scale``): ``summary.json`` and ``results.md``.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import (
    GENERATOR_CPU,
    SERVER_CPU,
    Record,
    alternate,
    cpu_seconds,
    head,
    pinned,
    process_tree,
    ratios,
    results_dir,
    write,
)
from benchmarks.http_peers import load_binary, measure_rate
from mcpfast.bench.procs import ServerProcess, free_port, wait_port

__all__ = ["Redis", "main", "serve"]


class Redis:
    """A ``redis-server`` for one run (no persistence), pinned to the generator's CPU."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        binary = shutil.which("redis-server")
        if binary is None:
            raise SystemExit("redis-server is not installed (make redis-install)")
        argv = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(workdir)]
        self.argv = pinned(argv, GENERATOR_CPU)
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port, self.proc)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def commands(self) -> int:
        out = subprocess.run(["redis-cli", "-p", str(self.port), "info", "stats"], capture_output=True, text=True, check=True).stdout
        return next(int(line.split(":")[1]) for line in out.splitlines() if line.startswith("total_commands_processed:"))

    def command_usec(self) -> int:
        """Microseconds Redis spent executing commands so far (``INFO commandstats``; no I/O)."""
        return self._commandstats()[0]

    def script_calls(self) -> int:
        """Script calls so far (``EVALSHA`` + ``EVAL``): each one request's or many requests' work."""
        return self._commandstats()[1]

    def _commandstats(self) -> tuple[int, int]:
        out = subprocess.run(["redis-cli", "-p", str(self.port), "info", "commandstats"], capture_output=True, text=True, check=True).stdout
        usec = scripts = 0
        for line in out.splitlines():
            if line.startswith("cmdstat_") and "usec=" in line:
                usec += int(line.split("usec=")[1].split(",")[0])
                if line.startswith(("cmdstat_evalsha:", "cmdstat_eval:")):
                    scripts += int(line.split("calls=")[1].split(",")[0])
        return usec, scripts

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def serve(store: str, logs: Path, *, workers: int = 1, pin: bool = True) -> ServerProcess:
    """``mcpfast serve --transport http --store STORE`` (the demo app), started: pinned to the
    server CPU with ``pin``; its output in ``logs/server-<port>.log``."""
    port = free_port()
    argv = [sys.executable, "-m", "mcpfast", "serve", "--transport", "http", "--port", str(port)]
    argv += ["--max-sessions", "1000000", "--store", store]
    if workers > 1:
        argv += ["--workers", str(workers)]
    argv = pinned(argv, SERVER_CPU if pin else None)
    server = ServerProcess(f"mcpfast serve --store {store}", argv, "127.0.0.1", port, log_path=logs / f"server-{port}.log")
    server.start()
    time.sleep(0.5 if workers > 1 else 0.1)  # every worker bound
    return server


def _scenario(kind: str, duration: int, warmup: int) -> list[str]:
    common = ["--duration", str(duration), "--warmup", str(warmup)]
    if kind == "calls":
        return ["--sessions", "32", *common, "--tool", "echo", "--arguments", '{"text":"hello"}']
    return ["--connections", "32", *common]


def one(kind: str, store_name: str, redis: Redis, workers: int, pinned: bool, opts: argparse.Namespace, log: Path) -> dict[str, Any]:
    """One server started for one measurement (the ``--workers`` comparison)."""
    store = "memory" if store_name == "memory" else redis.url
    with serve(store, log, workers=workers, pin=pinned) as server:
        result = _burst(kind, server, redis, opts.duration, opts.warmup)
        result["server_argv"] = shlex.join(server.argv)
        result["server_processes"] = len(process_tree(server.pid))
    return result


def _burst(kind: str, served: ServerProcess, redis: Redis, duration: int, warmup: int) -> dict[str, Any]:
    """One generator run against ``served``, with Redis's own counters around it."""
    redis_cpu = cpu_seconds(redis.proc.pid)
    commands = redis.commands()
    usec = redis.command_usec()
    scripts = redis.script_calls()
    result = measure_rate(served, kind, _scenario(kind, duration, warmup), duration + warmup + 60)
    result["redis_cpu_seconds"] = round(cpu_seconds(redis.proc.pid) - redis_cpu, 3)
    result["redis_command_usec"] = redis.command_usec() - usec
    result["redis_script_calls"] = redis.script_calls() - scripts
    result["redis_commands"] = redis.commands() - commands - 3  # minus the INFO calls counted in between
    return result


def paired(kind: str, redis: Redis, rnd: int, opts: argparse.Namespace, log: Path) -> dict[str, Any]:
    """Both stores' servers up at once (core 0), measured in alternating bursts (ABBA)."""
    servers: dict[str, ServerProcess] = {}
    try:
        for name in ("memory", "redis"):
            servers[name] = serve("memory" if name == "memory" else redis.url, log)
        done = alternate(
            ("memory", "redis"), opts.pairs, lambda name, _pair: _burst(kind, servers[name], redis, opts.duration, opts.warmup), start=rnd
        )
    finally:
        for server in servers.values():
            server.stop(timeout=15)
    bursts = done.results
    pair_ratios = ratios(map(_per_op_us, bursts["redis"]), map(_per_op_us, bursts["memory"]))
    return {
        "bursts": bursts,
        "server_argv": {name: shlex.join(server.argv) for name, server in servers.items()},
        "ratios": [round(x, 3) for x in pair_ratios],
        "ratio": round(statistics.median(pair_ratios), 3) if pair_ratios else None,
    }


def _per_op_us(result: dict[str, Any]) -> float | None:
    cpu = result.get("server_cpu") or {}
    value = cpu.get("us_per_operation")
    return float(value) if value is not None else None


def run(opts: argparse.Namespace, record: Record) -> dict[str, Any]:
    load_binary()
    out = Path(opts.out)
    log = Path(tempfile.mkdtemp())
    rounds: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        redis = Redis(Path(tmp))
        try:
            for r in range(opts.rounds):
                entry: dict[str, Any] = {}
                for kind in ("calls", "handshakes"):
                    print(f"[bench-scale] round {r + 1}: {kind}, memory and redis in {opts.pairs} pairs", file=sys.stderr, flush=True)
                    entry[kind] = paired(kind, redis, r, opts, log)
                    print(f"[bench-scale] round {r + 1}: {kind} redis/memory {entry[kind]['ratio']}", file=sys.stderr, flush=True)
                for workers in (1, 2):
                    print(f"[bench-scale] round {r + 1}: calls redis --workers {workers}", file=sys.stderr, flush=True)
                    entry[f"calls/redis/workers{workers}"] = one("calls", "redis", redis, workers, False, opts, log)
                rounds.append(entry)
        finally:
            redis.stop()
    summary = record.finish(
        rounds=rounds,
        redis=redis.argv,
        config={"rounds": opts.rounds, "pairs": opts.pairs, "duration": opts.duration, "warmup": opts.warmup},
    )
    write(out, "summary", summary)
    (out / "results.md").write_text(report(summary))
    return summary


def _median(rounds: list[dict[str, Any]], key: str, value: Any) -> float | None:
    """The median of ``value`` over every measurement under ``key``: ``kind/store`` names the
    bursts of that store in every round, any other key one measurement per round."""
    kind, _, store = key.partition("/")
    if store in ("memory", "redis") and kind in ("calls", "handshakes"):
        results = [b for r in rounds for b in r[kind]["bursts"][store]]
    else:
        results = [r[key] for r in rounds]
    values = [v for res in results if (v := value(res)) is not None]
    return statistics.median(values) if values else None


def report(summary: dict[str, Any]) -> str:
    rounds = summary["rounds"]
    cfg = summary.get("config", {})
    lines = [
        "# Scale-out: the Redis session store against the memory store",
        "",
        head(summary),
        "",
        "Both servers (memory store, Redis store) pinned to core 0 and up together; generator (`mcpfast-load`) "
        f"and `redis-server` pinned to core 1. {len(rounds)} rounds, each with fresh servers measured in "
        f"{cfg.get('pairs', '?')} pairs of {cfg.get('warmup', '?')} s + {cfg.get('duration', '?')} s bursts in ABBA "
        "order. The ratio is the median over rounds of each round's median pair ratio (Redis / memory CPU per "
        "operation); the other columns are medians over all bursts (every burst in summary.json).",
        "",
        "| scenario | store | server CPU µs/op | rate (ops/s) | Redis commands/op (scripts' inner ones included) | script calls/op | Redis CPU µs/op (10 ms ticks: coarse) | ratio redis/memory (CPU) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for kind in ("calls", "handshakes"):
        ratio_rounds = [r[kind]["ratio"] for r in rounds if r[kind]["ratio"] is not None]
        for store in ("memory", "redis"):
            key = f"{kind}/{store}"
            cpu = _median(rounds, key, _per_op_us)
            rate = _median(rounds, key, _rate)
            cmds = _median(rounds, key, lambda r: r["redis_commands"] / max(1, _ops(r)))
            scripts = _median(rounds, key, lambda r: r.get("redis_script_calls", 0) / max(1, _ops(r)))
            rcpu = _median(rounds, key, lambda r: r["redis_cpu_seconds"] * 1e6 / max(1, _ops(r)))
            ratio = f"**{statistics.median(ratio_rounds):.2f}x**" if ratio_rounds and store == "redis" else ""
            lines.append(
                f"| {kind} | {store} | {_f(cpu, 1)} | {_f(rate, 0)} | {_f(cmds, 3)} | {_f(scripts, 3)} | {_f(rcpu, 1)} | {ratio} |"
            )
    lines.append("")
    for kind in ("calls", "handshakes"):
        per_round = [r[kind]["ratio"] for r in rounds if r[kind]["ratio"] is not None]
        if per_round:
            pairs = "; ".join(", ".join(f"{x:.2f}" for x in r[kind]["ratios"]) for r in rounds)
            lines.append(
                f"- {kind}: redis/memory per round {', '.join(f'{x:.2f}x' for x in per_round)}, median "
                f"{statistics.median(per_round):.2f}x (pairs, round by round: {pairs})"
            )
    lines += ["", "## How much one Redis carries (estimate from Redis's measured command time)", ""] + _estimate(rounds)
    w1 = _median(rounds, "calls/redis/workers1", _rate)
    w2 = _median(rounds, "calls/redis/workers2", _rate)
    lines += [
        "",
        "## --workers 2 against --workers 1 (Redis store, unpinned)",
        "",
        "The generator and Redis run on the same 2 cores as the workers, so this shows what a second "
        "worker adds on a machine that also generates the load, not the scaling on dedicated cores.",
        "",
        "| workers | calls/s |",
        "|---|---|",
        f"| 1 | {_f(w1, 0)} |",
        f"| 2 | {_f(w2, 0)} |",
    ]
    if w1 and w2:
        lines.append(f"\nRatio 2/1: {w2 / w1:.2f}x")
    return "\n".join(lines) + "\n"


FLUSH_PERIOD = 2.0
"""``SharedSessions.flush_period`` at the default idle timeout: one refresh per period per process."""


def _estimate(rounds: list[dict[str, Any]]) -> list[str]:
    """Handshakes/s and live sessions one Redis core carries, from Redis's own CPU per operation.

    A tools/call makes no Redis round trip; what calls cost Redis is the batched refresh of
    the sessions they keep alive (one PEXPIRE per session and one ZADD per process per flush
    period), so the calls a Redis carries are bounded by sessions, not by calls/s.
    """
    hs = _median(rounds, "handshakes/redis", lambda r: r["redis_command_usec"] / max(1, _ops(r)))
    # the calls run: 32 sessions made and deleted (their share measured by the handshakes run)
    # and refreshed once per flush period; the rest of Redis's command time is the refreshes
    per_hs = hs or 0.0
    refresh = _median(
        rounds,
        "calls/redis",
        lambda r: max(0.0, r["redis_command_usec"] - 32 * per_hs) / max(1.0, 32 * r["run_wall_seconds"] / FLUSH_PERIOD),
    )
    out = []
    if hs:
        out.append(
            f"- handshake (create + DELETE): {hs:.1f} µs of Redis command time -> about {1e6 / hs:,.0f} handshakes/s per Redis "
            "core, shared by all N processes (N does not change the Redis work per handshake)."
        )
    if refresh:
        out.append(
            f"- keeping one session alive: {refresh:.2f} µs of Redis command time per flush period ({FLUSH_PERIOD:.0f} s) -> "
            f"about {FLUSH_PERIOD * 1e6 / refresh:,.0f} live sessions per Redis core, whatever their calls/s; "
            "calls/s then scale with N processes (each call costs Redis nothing)."
        )
    scripts = _median(rounds, "handshakes/redis", lambda r: r.get("redis_script_calls", 0) / max(1, _ops(r)))
    if scripts:
        out.append(
            f"- round trips: a handshake costs {scripts:.2f} script calls here (group commit: one create and one delete "
            f"script carry about {2 / scripts:.0f} handshakes at this load, fewer at a lighter one, at most 2 per handshake), "
            "so Redis's per-request socket work (read, parse, reply: not in the command time) is shared the same way; "
            "with N processes each sends its own batches, so the sharing per round trip shrinks as N grows at a fixed total rate."
        )
    out.append(
        "- command time is Redis's own `INFO commandstats` accounting (execution only, not socket I/O, which "
        "typically costs Redis as much again or more): read these as upper bounds for one Redis core to itself; "
        "here Redis shares core 1 with the generator. A DELETE also fans out one pub/sub message per subscribed "
        "process, so the handshake cost grows slowly with N."
    )
    return out


def _ops(result: dict[str, Any]) -> int:
    """The operations of the whole run (Redis commands are counted over all of it)."""
    requests = result.get("requests", {})
    key = "tools/call" if result.get("mode") == "calls" else "initialize"
    return int(requests.get(key, {}).get("ok_total", 0))


def _rate(result: dict[str, Any]) -> float | None:
    value = result.get("calls_per_second") if result.get("mode") == "calls" else result.get("handshakes_per_second")
    return float(value) if value is not None else None


def _f(value: float | None, digits: int) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scale", description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds, each with fresh servers")
    parser.add_argument("--pairs", type=int, default=6, help="memory/Redis burst pairs per round and scenario (ABBA)")
    parser.add_argument("--duration", type=int, default=2, help="seconds measured per burst")
    parser.add_argument("--warmup", type=int, default=1, help="seconds before each burst's measured window")
    parser.add_argument("--out", default=str(results_dir("scale")))
    run(parser.parse_args(argv), Record("scale", argv, lock=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
