"""``python -m benchmarks.capacity_peers``: the capacity of ``mcpfast serve`` and of the official
SDK servers at one SLO, on one core each (``bench_results/capacity``).

    flock /tmp/mcpfast-bench.lock python -m benchmarks.capacity_peers --out bench_results/capacity

For each peer of :mod:`benchmarks.peer_servers` (the same demo app: ``mcpfast``, ``python-sdk``,
``typescript-sdk``) and each question, a fresh server pinned to ``SERVER_CPU`` and one ``mcpfast
capacity`` search against it, the generator (the command and the Locust process it starts)
pinned to ``GENERATOR_CPU``:

* **calls/s**: ``tools_call`` (one session per user, ``tools/call echo``), held to
  ``--calls-slo`` (default ``tools/call:echo p99 < 10ms`` and ``fail% < 0.1``);
* **sessions/s**: ``handshake`` (``initialize``, ``notifications/initialized``, the first
  ``tools/call``, ``DELETE``: one arrival is one new session), held to ``--sessions-slo``
  (default ``p99 < 20ms`` over every request of the cycle, and ``fail% < 0.1``).

The SDK servers answer in JSON (``json_response``), as mcpfast does when nothing precedes the
reply. Each search writes its own folder (``<peer>-<question>/``: ``capacity.json``,
``capacity.csv``, ``capacity.png``, ``command.txt``, its logs); ``results.json`` and
``results.md`` gather the figures: the capacity (or its bounds), what broke first, and each peer's
figure as a share of mcpfast's. A search whose generator ran out of CPU is reported as
inconclusive, never as a capacity.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks.harness import GENERATOR_CPU, ROOT, SERVER_CPU, Record, Unavailable, arguments, head, pinned, publish, ratio
from benchmarks.peer_servers import PEERS, peer_versions, start_http
from mcpfast.bench.procs import child_env, log_path

PEER_NAMES = ("mcpfast", "python-sdk", "typescript-sdk")
QUESTIONS: dict[str, dict[str, Any]] = {
    "calls": {"family": "tools_call", "unit": "calls/s", "slo": ["tools/call:echo p99 < 10ms", "fail% < 0.1"]},
    "sessions": {"family": "handshake", "unit": "sessions/s", "slo": ["p99 < 20ms", "fail% < 0.1"]},
}


def search(peer: str, question: str, opts: Any, out: Path) -> dict[str, Any]:
    """One search against a fresh server of ``peer``: its ``capacity.json`` with the exit code."""
    spec = QUESTIONS[question]
    folder = out / f"{peer}-{question}"
    slo = opts.calls_slo if question == "calls" else opts.sessions_slo
    print(f"[capacity_peers] {peer}, {spec['unit']} ...", file=sys.stderr, flush=True)
    try:
        server = start_http(peer, cpus=SERVER_CPU, json_response=True, log_path=log_path(out, f"server-{peer}-{question}.log"))
    except (Unavailable, RuntimeError, OSError) as exc:
        print(f"[capacity_peers] {peer}: not measured: {exc}", file=sys.stderr, flush=True)
        return {"error": str(exc)}
    with server:
        argv = [
            opts.python, "-m", "mcpfast", "capacity", "--target", server.url, "--server-pid", str(server.pid),
            "--family", spec["family"], "--start", str(opts.start), "--max-time", str(opts.max_time),
            "--out", str(folder), *[a for s in (slo or spec["slo"]) for a in ("--slo", s)],
        ]  # fmt: skip
        code = subprocess.run(pinned(argv, GENERATOR_CPU), cwd=ROOT, env=child_env(), check=False).returncode
    try:
        result = json.loads((folder / "capacity.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return {"error": f"no capacity.json (exit {code}): {exc}"}
    return {
        "exit": code,
        "folder": folder.name,
        **{k: result.get(k) for k in ("status", "capacity", "last_good", "first_bad", "sentence", "slo")},
    }


def report(data: dict[str, Any]) -> str:
    lines = [
        "# Capacity at one SLO: mcpfast serve and the official SDK servers",
        "",
        head(data),
        "",
        f"Each server on CPU {SERVER_CPU}, the generator (`mcpfast capacity`, one Locust process on the native engine) on "
        f"CPU {GENERATOR_CPU}; the same demo app; one search per server and question (doubling, then bisection to 5%). "
        "Each row's folder holds its `capacity.json`, `capacity.csv`, `capacity.png` (the curve) and `command.txt`.",
        "",
        "| question | SLO | server | capacity | of mcpfast's | what broke first |",
        "|---|---|---|---|---|---|",
    ]
    for question, spec in QUESTIONS.items():
        ours = (data["results"].get("mcpfast") or {}).get(question) or {}
        for peer in data["peers"]:
            r = (data["results"].get(peer) or {}).get(question) or {}
            slo = " and ".join(r.get("slo") or spec["slo"])
            if "error" in r:
                lines.append(f"| {spec['unit']} | `{slo}` | {peer} | not measured: {r['error']} | – | – |")
                continue
            found = r.get("capacity")
            if found is not None:
                shown = f"**{found:,.0f}** {spec['unit']}"
            elif r.get("status") == "at_least":
                shown = f"at least {r.get('last_good') or 0:,.0f} {spec['unit']}"
            elif r.get("status") == "inconclusive" and r.get("last_good"):
                shown = f"at least {r['last_good']:,.0f} {spec['unit']} (the generator was the limit above)"
            else:
                shown = f"{r.get('status')} (last good {r.get('last_good')}, first bad {r.get('first_bad')})"
            share, bound = ratio(found, ours.get("capacity")), ""
            if share is None and found is not None and ours.get("capacity") is None and ours.get("last_good"):
                # mcpfast's search stopped at a lower bound: each peer's share is at most this
                share, bound = ratio(found, ours["last_good"]), "≤ "
            broke = str(r.get("sentence") or "").partition("; ")[2] or "–"
            lines.append(f"| {spec['unit']} | `{slo}` | {peer} ([curve]({r.get('folder')}/capacity.png)) | {shown} | "
                         f"{'–' if share is None else f'{bound}{share:.3g}x'} | {broke} |")  # fmt: skip
    lines += ["", "Versions: " + ", ".join(f"{k} {v}" for k, v in data["versions"].items() if v), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = arguments("capacity_peers", __doc__, "capacity", seconds=5.0, rounds=1)
    parser.add_argument("--peers", nargs="+", choices=PEER_NAMES, default=list(PEER_NAMES))
    parser.add_argument("--questions", nargs="+", choices=tuple(QUESTIONS), default=list(QUESTIONS))
    parser.add_argument("--calls-slo", action="append", help="the calls/s searches' SLO clauses (repeatable)")
    parser.add_argument("--sessions-slo", action="append", help="the sessions/s searches' SLO clauses (repeatable)")
    parser.add_argument("--start", type=float, default=25.0, help="every search's first rate (default 25/s)")
    parser.add_argument("--max-time", type=float, default=240.0, help="each search's time bound in seconds (default 240)")
    opts = parser.parse_args(argv)
    out = Path(opts.out)
    record = Record("capacity_peers", argv, lock=True)
    results: dict[str, dict[str, Any]] = {}
    for peer in opts.peers:
        for question in opts.questions:
            results.setdefault(peer, {})[question] = search(peer, question, opts, out)
    data = record.finish(
        peers=opts.peers,
        questions={q: QUESTIONS[q] for q in opts.questions},
        pinning={"server": SERVER_CPU, "generator": GENERATOR_CPU},
        versions=peer_versions(),
        available={name: name in results for name in PEERS},
        results=results,
    )
    publish(out, data, report)
    failed = [f"{p} {q}" for p, qs in results.items() for q, r in qs.items() if "error" in r]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
