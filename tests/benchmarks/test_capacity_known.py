"""``benchmarks.capacity_known``: from a synthetic set of searches (no load), each requirement's
verdict follows the numbers (the band, the pair, the first failed step's reason and rate, the
ratio of the two SLOs), and the tables give every capacity, status and what broke first."""

from __future__ import annotations

from typing import Any

from benchmarks.capacity_known import LOCKED, LOOSE, SEARCHES, TIGHT, chosen, first_failed, pair_spread, report, verdicts


def step(offered: float, achieved: float, verdict: str, *reasons: str) -> dict[str, Any]:
    return {"offered": offered, "achieved": achieved, "verdict": verdict, "reasons": list(reasons),
            "p50_us": 6000.0, "p99_us": 40000.0, "generator_cpu": 0.2, "server_cpu": 0.3}  # fmt: skip


def found(capacity: float | None, sentence: str, *steps: dict[str, Any], status: str = "found") -> dict[str, Any]:
    failed = [s for s in steps if s["verdict"] != "pass"]
    lowest = min(failed, key=lambda s: s["offered"]) if failed else None
    return {"exit": 0, "command": "mcpfast capacity --target X", "folder": "x", "status": status, "capacity": capacity,
            "last_good": capacity, "first_bad": None, "sentence": sentence, "elapsed_s": 60.0,
            "first_failed": lowest and {k: lowest[k] for k in ("offered", "achieved", "verdict", "reasons")}, "steps": list(steps)}  # fmt: skip


def synthetic() -> dict[str, dict[str, Any]]:
    over = step(200, 181, "fail", "achieved 181/s of 200/s offered")
    results = {
        s.name: found(190.0, "capacity 190 calls/s at tools/call:locked p99 < 100ms; at 200/s achieved 181/s of 200/s offered",
                      step(100, 100, "pass"), over)
        for s in LOCKED
    }  # fmt: skip
    # the second python search came out low: the pair does not hold, the others do
    results["locked-python-2"] = found(150.0, "capacity 150 calls/s at tools/call:locked p99 < 100ms; at 160/s p99 read 180 ms", over)
    results["locked-processes-2-2"] = {"error": "no capacity.json (exit 1; log logs/locked-processes-2-2.log)"}
    results[TIGHT.name] = found(
        331.0,
        "capacity 331 calls/s at tools/call:exponential p99 < 20ms; at 345/s tools/call:exponential p99 read 24.1 ms (SLO < 20 ms, 1.2x)",
        step(200, 200, "pass"),
        step(400, 330, "fail", "achieved 330/s of 400/s offered"),
        step(345, 344, "fail", "tools/call:exponential p99 read 24.1 ms (SLO < 20 ms, 1.2x)"),
    )
    results[LOOSE.name] = found(470.0, "capacity 470 calls/s at tools/call:exponential p99 < 1s; at 490/s achieved 450/s")
    return results


def test_each_requirement_holds_or_not_from_the_numbers() -> None:
    results = synthetic()
    v = {line["requirement"]: line for line in verdicts(results)}
    locked = {k.split(":")[0]: line for k, line in v.items() if k.startswith("locked")}
    assert locked["locked, native engine, one process"]["holds"]
    assert "190/s, 190/s; spread 0.0%" in locked["locked, native engine, one process"]["detail"]
    assert not locked["locked, gevent users"]["holds"]
    assert "190/s, 150/s; spread 23.5%" in locked["locked, gevent users"]["detail"]
    assert not locked["locked, native engine, two processes"]["holds"]  # one search errored: no capacity
    assert "error: no capacity.json" in locked["locked, native engine, two processes"]["detail"]
    tight = [line for k, line in v.items() if k.startswith("exponential, p99 < 20ms: about")]
    assert len(tight) == 1 and tight[0]["holds"] and tight[0]["detail"] == "331/s"
    (above,) = [line for k, line in v.items() if "the step above" in k]
    assert above["holds"], above  # the lowest failed step (345/s, not the 400/s overload) fell on p99 at 99.7%
    assert "at 345/s offered: achieved 344/s (99.7%)" in above["detail"]
    (below,) = [line for k, line in v.items() if "well below" in k]
    assert below["holds"] and "331/s / 470/s = 0.70x" in below["detail"]


def test_the_step_above_must_fail_on_p99_while_the_server_keeps_up() -> None:
    results = synthetic()
    tight = results[TIGHT.name]
    tight["first_failed"] = {"offered": 345, "achieved": 320, "verdict": "fail", "reasons": ["tools/call:exponential p99 read 30 ms"]}
    assert not next(line for line in verdicts(results) if "the step above" in line["requirement"])["holds"]  # 92.8% achieved
    tight["first_failed"] = {
        "offered": 345,
        "achieved": 344,
        "verdict": "fail",
        "reasons": ["median latency grew", "tools/call:exponential p99 read 30 ms"],
    }
    assert not next(line for line in verdicts(results) if "the step above" in line["requirement"])["holds"]  # p99 was not first
    results[LOOSE.name]["capacity"] = 360.0
    assert not next(line for line in verdicts(results) if "well below" in line["requirement"])["holds"]  # 0.92x
    assert first_failed({"steps": [step(400, 330, "fail"), step(345, 344, "inconclusive"), step(200, 200, "pass")]}) == {
        "offered": 345, "achieved": 344, "verdict": "inconclusive", "reasons": []}  # fmt: skip


def test_the_tables_give_every_capacity_status_and_what_broke_first() -> None:
    results = synthetic()
    data = {
        "command": "flock /tmp/mcpfast-bench.lock python -m benchmarks.capacity_known",
        "results": results,
        "verdicts": verdicts(results),
    }
    text = report(data)
    rows = {line.split(" | ")[0].split("](")[0].removeprefix("| ["): line for line in text.splitlines() if line.startswith("| [")}
    assert set(rows) == {s.name for s in SEARCHES}
    assert "| 190/s | found | 0 | at 200/s achieved 181/s of 200/s offered |" in rows["locked-native-1"]
    assert "python, 1 process | `tools/call:locked p99 < 100ms` | 100/s | 150/s | found" in rows["locked-python-2"]
    assert "error: no capacity.json" in rows["locked-processes-2-2"]
    assert "at 345/s tools/call:exponential p99 read 24.1 ms" in rows[TIGHT.name]
    lines = text.splitlines()
    assert sum(line.startswith("- **does not hold**") for line in lines) == 2  # the python pair, the two-process pair
    assert sum(line.startswith("- **holds**") for line in lines) == 4
    assert "| 345 | 344 | 6.0 | 40.0 | 20% | 30% | fail | tools/call:exponential p99 read 24.1 ms (SLO < 20 ms, 1.2x) |" in lines
    assert text.startswith("# `mcpfast capacity` against servers of known capacity")
    assert pair_spread(190.0, None) is None


def test_only_picks_parts_and_searches_keeping_the_shared_server() -> None:
    assert [[s.name for s in g] for g in chosen(["exponential"])] == [[TIGHT.name, LOOSE.name]]
    assert [[s.name for s in g] for g in chosen(["locked-native-1", LOOSE.name])] == [["locked-native-1"], [LOOSE.name]]
    assert len(chosen(None)) == 7


def test_no_tight_capacity_leaves_no_step_above_it() -> None:
    results = synthetic()
    below = step(200, 200, "fail", "tools/call:exponential p99 read 20.8 ms (SLO < 20 ms, 1x)")
    results[TIGHT.name] = found(None, "capacity below 200 calls/s at tools/call:exponential p99 < 20ms", below, status="below")
    (above,) = [line for line in verdicts(results) if "the step above" in line["requirement"]]
    assert not above["holds"] and above["detail"].startswith("no capacity found"), above
