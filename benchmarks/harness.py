"""The one harness of the maintainer benchmarks: pinning, alternating rounds, ratios, records.

Every tool in ``benchmarks/`` measures the same way, so their figures compare:

* **pinning**: the server on :data:`SERVER_CPU`, the generator on :data:`GENERATOR_CPU`
  (:func:`pinned` puts a command behind ``taskset -c``; :func:`affinity` pins the calling thread
  and so every process it starts, with ``os.sched_setaffinity``);
* **alternating rounds** (:func:`alternate`): every side measured once per round, the order
  reversed (or rotated) from one round to the next, so that a drift of the shared machine hits
  every side alike, with the load average of each round;
* **ratios** (:func:`ratios`, :func:`spread`): taken per round (two runs under the same load)
  and summarised by their median, with the per-round values kept;
* **records** (:class:`Record`): the command line, the machine, the load average before and
  after and whether the machine was busy, written beside the results (:func:`write`) into
  ``bench_results/<area>/`` (:func:`results_dir`).

CPU time of processes (:func:`cpu_seconds`, :func:`process_tree`) is read from ``/proc``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from mcpfast.bench.procs import loadavg, machine_info, machine_was_busy
from mcpfast.client.probe import process_tree

# the load average, the busy rule and the process tree are the ones `mcpfast bench --soak` records too
from mcpfast.results.files import write_json

__all__ = [
    "CLOCK_TICKS",
    "GENERATOR_CPU",
    "LOCK",
    "ROOT",
    "SERVER_CPU",
    "Alternated",
    "Record",
    "Unavailable",
    "affinity",
    "alternate",
    "arguments",
    "cpu_seconds",
    "cpu_ticks",
    "exit_on_problems",
    "fill_presets",
    "head",
    "loadavg",
    "machine_was_busy",
    "medians",
    "order",
    "parse_cpus",
    "pinned",
    "process_tree",
    "ratio",
    "ratios",
    "results_dir",
    "spread",
    "write",
]

ROOT = Path(__file__).resolve().parents[1]
SERVER_CPU = "0"
GENERATOR_CPU = "1"
LOCK = "flock /tmp/mcpfast-bench.lock"
"""How the tools are run on a shared machine: one benchmark at a time."""
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

L = TypeVar("L")
T = TypeVar("T")


class Unavailable(RuntimeError):
    """A tool or a peer server this machine lacks (the measurement is skipped, not faked)."""


def results_dir(area: str) -> Path:
    """``bench_results/<area>``: where a tool writes by default."""
    return ROOT / "bench_results" / area


def arguments(tool: str, doc: str | None, area: str, *, seconds: float, rounds: int) -> argparse.ArgumentParser:
    """A tool's parser with the options every round-based tool takes: ``--out`` (default
    ``bench_results/<area>``), ``--seconds`` per run, ``--rounds``, and ``--python`` (the
    interpreter of the servers and of Locust)."""
    parser = argparse.ArgumentParser(prog=f"python -m benchmarks.{tool}", description=(doc or "").split("\n\n")[0])
    parser.add_argument("--out", default=str(results_dir(area)), help=f"result directory (default bench_results/{area})")
    parser.add_argument("--seconds", type=type(seconds), default=seconds, help="seconds per run")
    parser.add_argument("--rounds", type=int, default=rounds, help="alternating rounds")
    parser.add_argument("--python", default=sys.executable, help="the interpreter of the servers and of Locust")
    return parser


# ------------------------------------------------------------------------------------ pinning


def fill_presets(opts: argparse.Namespace, presets: Mapping[str, Any]) -> None:
    """Each option of ``presets`` the command line left unset (``None``) takes the preset's value
    (a tool's defaults, or its ``--quick`` ones): options given explicitly win over both."""
    for key, value in presets.items():
        if getattr(opts, key) is None:
            setattr(opts, key, value)


def exit_on_problems(found: Sequence[str]) -> int:
    """A run's exit code: 1 with its problems said on stderr, else 0."""
    if found:
        print("problems: " + "; ".join(found), file=sys.stderr)
    return 1 if found else 0


def pinned(argv: Sequence[str], cpus: str | int | None) -> list[str]:
    """``argv`` behind ``taskset -c CPUS`` (unchanged when ``cpus`` is None).

    Raises:
        Unavailable: ``taskset`` (util-linux) is not installed.
    """
    if cpus is None:
        return list(argv)
    taskset = shutil.which("taskset")
    if taskset is None:
        raise Unavailable("taskset not found (util-linux): cannot pin a process to a CPU")
    return [taskset, "-c", str(cpus), *argv]


def parse_cpus(text: str) -> set[int]:
    """A taskset-style CPU list (``"1"``, ``"0,2"``, ``"0-3"``) as a set.

    Raises:
        ValueError: not a CPU list.
    """
    cpus: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        try:
            a, b = int(lo), int(hi or lo)
        except ValueError:
            raise ValueError(f"not a CPU list: {text!r}") from None
        if a < 0 or b < a:
            raise ValueError(f"not a CPU list: {text!r}")
        cpus.update(range(a, b + 1))
    if not cpus:
        raise ValueError(f"empty CPU list: {text!r}")
    return cpus


@contextlib.contextmanager
def affinity(cpus: str | None) -> Iterator[None]:
    """Pin the calling thread (and so every process and thread it starts) to ``cpus``."""
    if cpus is None:
        yield
        return
    old = os.sched_getaffinity(0)
    os.sched_setaffinity(0, parse_cpus(cpus))
    try:
        yield
    finally:
        os.sched_setaffinity(0, old)


# -------------------------------------------------------------------------------- CPU time


def cpu_ticks(pid: int) -> int | None:
    """User + system CPU of one process in clock ticks (``None`` once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return None


def cpu_seconds(pid: int, *, tree: bool = False) -> float:
    """User + system CPU seconds of a process (``tree``: and every process below it); 0.0 once gone."""
    pids = process_tree(pid) if tree else [pid]
    return sum(cpu_ticks(p) or 0 for p in pids) / CLOCK_TICKS


# ---------------------------------------------------------------------------------- rounds


def order(labels: Sequence[L], rnd: int, *, rotate: bool = False) -> list[L]:
    """The order of round ``rnd``: as given on even rounds, reversed on odd ones (ABBA); with
    ``rotate``, each round starts one label later (every label goes first in turn)."""
    if rotate:
        k = rnd % len(labels) if labels else 0
        return [*labels[k:], *labels[:k]]
    return list(labels) if rnd % 2 == 0 else list(labels)[::-1]


@dataclass
class Alternated(Generic[L, T]):
    """What :func:`alternate` measured: per label one result per round, in round order."""

    results: dict[L, list[T]]
    orders: list[list[L]] = field(default_factory=list)
    loadavg: list[list[float]] = field(default_factory=list)

    def round(self, rnd: int) -> dict[L, T]:
        """Every label's result of round ``rnd``."""
        return {label: values[rnd] for label, values in self.results.items()}


def alternate(
    labels: Sequence[L],
    rounds: int,
    measure: Callable[[L, int], T],
    *,
    rotate: bool = False,
    start: int = 0,
    after_round: Callable[[int, dict[L, T]], None] | None = None,
) -> Alternated[L, T]:
    """Measure every label once per round, ``rounds`` times, in the order :func:`order` gives
    (``start`` offsets the parity: a nested loop passes its outer round); ``after_round`` sees
    each finished round (to print it)."""
    if rounds < 1 or not labels:
        raise ValueError("alternate needs at least one round and one label")
    done: Alternated[L, T] = Alternated({label: [] for label in labels})
    for rnd in range(rounds):
        done.loadavg.append(loadavg())
        now = order(labels, start + rnd, rotate=rotate)
        done.orders.append(now)
        for label in now:
            done.results[label].append(measure(label, rnd))
        if after_round is not None:
            after_round(rnd, done.round(rnd))
    return done


def ratio(a: Any, b: Any) -> float | None:
    """``a / b``; None when either is missing or ``b`` is zero."""
    if not isinstance(a, int | float) or not isinstance(b, int | float) or b == 0:
        return None
    return float(a) / float(b)


def ratios(a: Iterable[Any], b: Iterable[Any]) -> list[float]:
    """Per-round ratios ``a[i] / b[i]`` (rounds where either side has no number left out)."""
    return [r for x, y in zip(a, b, strict=True) if (r := ratio(x, y)) is not None]


def spread(values: Sequence[float], digits: int = 3) -> dict[str, Any]:
    """Per-round values and their median, min and max (None for all when there are none)."""
    if not values:
        return {"per_round": [], "median": None, "min": None, "max": None}
    return {
        "per_round": [round(v, digits) for v in values],
        "median": round(statistics.median(values), digits),
        "min": round(min(values), digits),
        "max": round(max(values), digits),
    }


def medians(rows: Sequence[Mapping[str, Any]], keys: Iterable[str] | None = None) -> dict[str, float]:
    """The median of each numeric ``key`` over ``rows`` (default: every key of the first row)."""
    wanted = list(keys) if keys is not None else (list(rows[0]) if rows else [])
    out: dict[str, float] = {}
    for key in wanted:
        values = [r[key] for r in rows if isinstance(r.get(key), int | float) and not isinstance(r.get(key), bool)]
        if values:
            out[key] = statistics.median(values)
    return out


# --------------------------------------------------------------------------------- records


class Record:
    """The head of a tool's results: its command line, the machine, the load average at start.

    ``finish`` adds the end time, the load average at the end and ``machine_was_busy`` to the
    results it is given.
    """

    def __init__(self, tool: str, argv: Sequence[str] | None = None, *, modules: Sequence[str] = (), lock: bool = False) -> None:
        args = list(sys.argv[1:] if argv is None else argv)
        self.command = (f"{LOCK} " if lock else "") + shlex.join(["python", "-m", f"benchmarks.{tool}", *args])
        self.started = _utc()
        self.machine = machine_info(modules)
        self.loadavg_at_start = loadavg()

    def finish(self, **results: Any) -> dict[str, Any]:
        end = loadavg()
        return {
            "command": self.command,
            "started": self.started,
            "finished": _utc(),
            "machine": self.machine,
            "loadavg_at_start": self.loadavg_at_start,
            "loadavg_at_end": end,
            "machine_was_busy": machine_was_busy(self.loadavg_at_start, end, self.machine.get("nproc")),
            **results,
        }


def head(data: Mapping[str, Any]) -> str:
    """``Command: ...`` with the start time, the load averages and, when so, that the machine was busy."""
    busy = " **The machine was busy** (other work ran: read the per-round ratios)." if data.get("machine_was_busy") else ""
    return (
        f"Command: `{data['command']}` (started {data.get('started')}; load average at start {data.get('loadavg_at_start')}, "
        f"at end {data.get('loadavg_at_end')}).{busy}"
    )


def write(out: Path, name: str, data: Any, markdown: str | None = None) -> Path:
    """``<out>/<name>.json`` (atomically) and, with ``markdown``, ``<out>/<name>.md`` beside it."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.json"
    write_json(path, data)
    if markdown is not None:
        (out / f"{name}.md").write_text(markdown, encoding="utf-8")
    return path


def publish(out: Path, data: Any, report: Callable[[Any], str]) -> None:
    """``<out>/results.json`` and ``results.md`` (``report(data)``), the report printed too."""
    markdown = report(data)
    write(out, "results", data, markdown)
    print(markdown)


def round_problems(label: str, rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """A line for each round of ``label`` that ended in an error or with failed requests."""
    return [
        f"{label} round {rnd}: {row.get('error') or str(row['failures']) + ' failures'}"
        for rnd, row in enumerate(rows, 1)
        if "error" in row or row.get("failures")
    ]


def _utc() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
