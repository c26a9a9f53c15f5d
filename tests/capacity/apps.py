"""Servers whose capacity is known by construction, for the capacity search's tests.

``locked``: each call holds one process-wide lock for 5 ms, so the server completes at most 200
calls a second whatever the load (a little less: the rest of a call is outside the lock).
``exponential``: each call holds the lock for an exponentially distributed time of mean 2 ms
(at most ~500 a second), so its latency rises long before that limit, as an M/M/1 queue's does:
a p99 bound breaks well below the throughput limit.
"""

from __future__ import annotations

import random
import threading
import time

import mcpfast

app = mcpfast.Server("capacity-known")
LOCK = threading.Lock()
HOLD_S = 0.005
MEAN_S = 0.002
_draw = random.Random(20261206)


@app.tool()
def locked(text: str = "") -> str:
    """Hold the process-wide lock for 5 ms."""
    with LOCK:
        time.sleep(HOLD_S)
    return text


@app.tool()
def exponential(text: str = "") -> str:
    """Hold the process-wide lock for an exponential time of mean 2 ms."""
    with LOCK:
        time.sleep(_draw.expovariate(1.0 / MEAN_S))
    return text


@app.tool()
def echo(text: str = "") -> str:
    """No wait: the generator's limit, not the server's."""
    return text
