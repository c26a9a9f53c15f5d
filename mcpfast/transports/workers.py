"""``mcpfast serve --transport http --workers N``: N processes on one port, and their supervisor.

Each worker is a whole ``mcpfast serve`` process that binds the port with ``SO_REUSEPORT``, so
the kernel spreads new connections over the workers. The supervisor (the process the user
started) only starts workers, restarts one that dies (at most ``MAX_RESTARTS`` within
``RESTART_WINDOW`` seconds, then it gives up and stops the rest), and on SIGTERM/SIGINT tells
every worker to drain: stop accepting, finish what is in flight within ``--grace`` seconds,
close streams; a worker still alive ``grace + KILL_AFTER`` seconds later is killed.

Sessions made by one worker must be known to the others, so ``N > 1`` needs a shared store
(``--store redis://…``) unless the server makes none (``--stateless-only``); ``check`` refuses
the memory store otherwise.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from typing import Final

__all__ = ["WORKER_ENV", "check", "reuse_port_socket", "supervise"]

logger = logging.getLogger("mcpfast.workers")

WORKER_ENV: Final = "MCPFAST_WORKER"
"""Set in a worker's environment (its number): bind with SO_REUSEPORT, do not supervise."""
MAX_RESTARTS: Final = 10
RESTART_WINDOW: Final = 60.0
KILL_AFTER: Final = 3.0


def check(workers: int, store: str | None, stateless_only: bool = False) -> str | None:
    """Why ``workers`` processes cannot serve with ``store`` (``None``: they can).

    ``stateless_only``: the server keeps no sessions (``--stateless-only``), so the memory store
    serves any number of workers."""
    if workers < 1:
        return "--workers must be at least 1"
    if workers > 1 and (store is None or store == "memory") and not stateless_only:
        return (
            f"--workers {workers} needs a shared session store: with --store memory a session made by one "
            "worker is unknown to the others (add --store redis://HOST:PORT/DB, or serve 2026-07-28 "
            "stateless requests only with --stateless-only)"
        )
    return None


def reuse_port_socket(host: str, port: int) -> socket.socket:
    """A listening-ready TCP socket bound with SO_REUSEPORT (every worker binds its own)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.setblocking(False)
    return sock


def supervise(argv: list[str], workers: int, grace: float, *, metrics: bool = False) -> int:
    """Run ``mcpfast <argv>`` ``workers`` times (each a worker) until SIGTERM/SIGINT; the exit code.

    ``metrics``: the workers share one prometheus-client multiprocess directory (made here,
    removed at the end), so ``/metrics`` on any of them sums them all.
    """
    if metrics:
        import shutil
        import tempfile

        from mcpfast.transports.metrics import MULTIPROC_ENV

        shared = tempfile.mkdtemp(prefix="mcpfast-metrics-")
        os.environ[MULTIPROC_ENV] = shared
        try:
            return supervise(argv, workers, grace)
        finally:
            shutil.rmtree(shared, ignore_errors=True)
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    procs: dict[int, subprocess.Popen[bytes]] = {}
    restarts: deque[float] = deque()

    def spawn(n: int) -> None:
        env = {**os.environ, WORKER_ENV: str(n)}
        procs[n] = subprocess.Popen([sys.executable, "-m", "mcpfast", *argv], env=env)

    for n in range(workers):
        spawn(n)
    code = 0
    try:
        while not stopping:
            time.sleep(0.1)
            for n, proc in list(procs.items()):
                if proc.poll() is None or stopping:
                    continue
                now = time.monotonic()
                while restarts and restarts[0] < now - RESTART_WINDOW:
                    restarts.popleft()
                if len(restarts) >= MAX_RESTARTS:
                    print(f"mcpfast: worker {n} keeps dying (exit {proc.returncode}); stopping", file=sys.stderr)
                    code = 1
                    stopping = True
                    break
                restarts.append(now)
                print(f"mcpfast: worker {n} (pid {proc.pid}) exited with {proc.returncode}; restarting", file=sys.stderr)
                spawn(n)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)  # drain: stop accepting, finish within the grace
        deadline = time.monotonic() + grace + KILL_AFTER
        for proc in procs.values():
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return code
