"""The native driver's polls, on an engine that keeps the ``NativeEngine`` contract (windows that
``drain()`` hands over once, cumulative ``histograms()``), run in a child interpreter (Locust's
import gevent-patches the process; see conftest.py).  Prints one JSON line: after every poll and
after ``finish()``, Locust's request counts and the µs histograms' sample counts per name."""

from __future__ import annotations

import json
from collections import defaultdict

import locust  # first
from locust.env import Environment

from mcpfast._core import DrainRow
from mcpfast.locust.native import NativeDriver

NAMES = ("initialize", "notifications/initialized", "tools/call:echo (first)")


class Engine:
    """What the binding does: each request lands in the current window and in the cumulative
    histograms; ``drain()`` takes the window; ``stop()`` ends the run."""

    def __init__(self) -> None:
        self.window: dict[str, list[int]] = defaultdict(list)
        self.cumulative: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))

    def complete(self, name: str, us: int) -> None:
        self.window[name].append(us)
        self.cumulative[name][us] += 1

    def drain(self) -> list[DrainRow]:
        rows = []
        for name, lat in self.window.items():
            buckets: dict[int, int] = defaultdict(int)
            for us in lat:
                buckets[us] += 1
            ms = [us / 1000.0 for us in lat]
            rows.append(
                DrainRow("mcp-stdio", name, len(lat), 0, sum(ms), min(ms), max(ms), 10 * len(lat), sorted(buckets.items()),
                         [(1_700_000_000, len(lat), 0)], 1_700_000_000.5, [], [])
            )  # fmt: skip
        self.window.clear()
        return rows

    def histograms(self) -> list[tuple[str, str, list[tuple[int, int]]]]:
        return [("mcp-stdio", name, sorted(b.items())) for name, b in self.cumulative.items()]

    def status(self) -> dict:
        return {"cpu_s": 0.0}

    def stop(self, grace_s: float) -> None:
        pass

    def events(self) -> list:
        return []

    def reset(self) -> None:
        self.cumulative.clear()


def counts(env: Environment, drv: NativeDriver) -> dict:
    locust_n = {name: e.num_requests for (name, _), e in env.stats.entries.items() if e.num_requests}
    hist_n = {name: h.total_count for (_, name), h in drv.stats.ok.items() if h.total_count}
    return {"locust": locust_n, "histograms": hist_n}


def main() -> None:
    env = Environment(events=locust.events)
    drv = NativeDriver(env, "handshake", None)
    engine = Engine()
    drv.engine = engine  # what _start() sets, without its greenlets: the polls are called here in order
    seen = []
    # second 1: four sessions finish their handshake; second 2: none does (a handshake takes longer
    # than a poll interval on a loaded machine); then four more, drained by finish() after stop
    for batch in (4, 0, 4):
        for i in range(batch):
            for name in NAMES:
                engine.complete(name, 1000 + 37 * i)
        drv.poll()
        seen.append(counts(env, drv))
    for i in range(4):
        engine.complete(NAMES[0], 2000 + i)
    drv.finish()
    seen.append(counts(env, drv))
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
