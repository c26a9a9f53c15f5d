"""Processes and the machine, measured the same way by ``mcpfast bench`` and the maintainer
benchmarks (``benchmarks/``, which add pinning and CPU time on top), so that the figures they
print compare: where the numbers were taken (:func:`machine_info`, :func:`machine_was_busy`),
ports, a sampling thread, logs beside the results, and
:class:`ServerProcess`, the one class that starts a server and waits for it.
"""

from __future__ import annotations

import os
import platform
import shlex
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Self, TextIO

from mcpfast.client.base import rss_kib  # the swarm measures it too; one definition

__all__ = [
    "BUSY_START_SHARE",
    "REFERENCE_SERVER",
    "Sampler",
    "ServerProcess",
    "child_env",
    "cpus_available",
    "free_port",
    "loadavg",
    "log_path",
    "log_tail",
    "machine_info",
    "machine_was_busy",
    "port_open",
    "reference_argv",
    "reference_server",
    "rss_kib",
    "stop_process",
    "wait_port",
]

SERVER_START_TIMEOUT = 20.0
ROOT = Path(__file__).resolve().parents[2]
"""This checkout (or the folder the package is installed in): first on a child's ``PYTHONPATH``."""
LOGS = "logs"
"""The folder (beside a run's results) that takes its logs; ``.gitignore`` keeps it out of git."""
BUSY_START_SHARE = 0.5
"""A 1-minute load average above this share of the CPUs before a run: other work was running."""


def child_env() -> dict[str, str]:
    """The environment of a benchmark's child process: this checkout first on ``PYTHONPATH``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def _proc_field(path: str, key: str) -> str | None:
    """The value after ``key`` on the first line of a ``/proc`` file that starts with it."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith(key):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def cpus_available() -> int:
    """CPUs this process may run on (its affinity), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover
        return os.cpu_count() or 1


def loadavg() -> list[float]:
    """The 1, 5 and 15 minute load averages, rounded."""
    return [round(x, 2) for x in os.getloadavg()]


def machine_was_busy(start: Sequence[float], end: Sequence[float], cpus: int | None = None) -> bool:
    """Whether other work shared the machine: a 1-minute load average above half the CPUs before
    the run (nothing of it ran yet), or above every CPU after it (more than the run's own
    processes, which a pinned benchmark keeps to the CPUs it has)."""
    n = cpus or cpus_available()
    return bool(start and start[0] > BUSY_START_SHARE * n) or bool(end and end[0] > n)


def machine_info(modules: Sequence[str] = ("locust", "gevent")) -> dict[str, Any]:
    """Where the numbers were taken: CPUs, memory, load average now, Python, mcpfast, versions.

    ``modules``: distributions whose versions are recorded (as ``<name>_version``).
    """
    from importlib.metadata import PackageNotFoundError, version

    from mcpfast._version import __version__

    memory = _proc_field("/proc/meminfo", "MemTotal:")
    info: dict[str, Any] = {
        "nproc": cpus_available(),
        "cpu_count": os.cpu_count(),
        "cpu_model": _proc_field("/proc/cpuinfo", "model name") or platform.processor() or None,
        "mem_total_kib": int(memory.split()[0]) if memory else None,
        "platform": platform.platform(),
        "kernel": platform.release(),
        "hostname": platform.node(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "python_executable": sys.executable,
        "loadavg": loadavg(),
        "mcpfast_version": __version__,
        "mcpfast_core_env": os.environ.get("MCPFAST_CORE") or None,
    }
    info["loadavg_at_start"] = info["loadavg"]
    try:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from mcpfast.core import IMPLEMENTATION

        info["mcpfast_core"] = IMPLEMENTATION
    except Exception as exc:  # pragma: no cover - broken core
        info["mcpfast_core"] = f"unavailable: {exc}"
    for mod in modules:
        try:
            info[f"{mod}_version"] = version(mod)
        except PackageNotFoundError:
            info[f"{mod}_version"] = None
    return info


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def wait_port(port: int, proc: subprocess.Popen[Any], timeout: float = 20.0, host: str = "127.0.0.1") -> None:
    """Wait until something listens on ``host:port``.

    Raises:
        RuntimeError: ``proc`` exited first, or nothing listened within ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited with {proc.returncode}")
        if port_open(host, port):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def stop_process(proc: subprocess.Popen[Any], timeout: float = 5.0) -> int | None:
    """terminate, wait, kill."""
    if proc.poll() is None:
        try:
            proc.terminate()
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:  # pragma: no cover
                pass
        except ProcessLookupError:  # pragma: no cover
            pass
    return proc.returncode


class Sampler(threading.Thread):
    """Calls ``sample()`` every ``interval`` seconds until stopped and keeps each row it returns
    (``None``: nothing to keep) behind its time, ``clock()``: ``(t, *row)``."""

    def __init__(self, sample: Callable[[], tuple[Any, ...] | None], interval: float, clock: Callable[[], float] = time.time) -> None:
        super().__init__(daemon=True, name="mcpfast-bench-sampler")
        self.sample = sample
        self.interval = interval
        self.clock = clock
        self.rows: list[tuple[Any, ...]] = []
        self._lock = threading.Lock()
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            row = self.sample()
            if row is not None:
                with self._lock:
                    self.rows.append((self.clock(), *row))
            self._stop_event.wait(self.interval)

    def between(self, start: float, end: float) -> list[tuple[Any, ...]]:
        """The rows taken from ``start`` to ``end`` (on ``clock``), while it runs."""
        with self._lock:
            return [r for r in self.rows if start <= r[0] <= end]

    def stop(self) -> None:
        self._stop_event.set()
        if self.is_alive():
            self.join(timeout=5.0)


def log_path(out: Path, name: str) -> Path:
    """Where a run's log ``name`` goes: ``<out>/logs/<name>`` (ignored by git), the folder made."""
    folder = out / LOGS
    folder.mkdir(parents=True, exist_ok=True)
    return folder / name


def log_tail(path: Path | None, lines: int = 6, sep: str = "\n") -> str:
    """The last ``lines`` lines of a log, joined by ``sep`` (``""`` when unreadable)."""
    if path is None:
        return "(output discarded)"
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return sep.join(text.strip().splitlines()[-lines:])


class ServerProcess:
    """A server process listening on ``host:port``: the one class the benchmarks start servers with.

    Its output goes to ``log_path`` (first line: the command; ``None``: discarded), its working
    directory is ``cwd`` (default: :data:`ROOT`, which ``python -m`` imports from first), its
    environment ``env`` (default: :func:`child_env`). ``start`` waits until ``ready`` says so (by
    default: the port accepts) and raises ``RuntimeError``, having stopped it, when the process
    exits first or the wait times out; ``stop`` terminates, waits and kills. A context manager:
    leaving the block stops it.
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        host: str,
        port: int,
        *,
        log_path: Path | None = None,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.name = name  # what to call it in messages
        self.argv = list(argv)
        self.host = host
        self.port = port
        self.log_path = log_path
        self.env = env
        self.cwd = cwd if cwd is not None else ROOT
        self.proc: subprocess.Popen[Any] | None = None
        self._log: TextIO | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/mcp"

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc is not None else 0

    def start(self, timeout: float = SERVER_START_TIMEOUT, ready: Callable[[], str | None] | None = None) -> Self:
        """Start it and wait until ``ready()`` returns ``None`` (else it says what is missing).

        Raises:
            RuntimeError: the process exited, or was not ready within ``timeout`` seconds
                (it is stopped first).
        """
        out: Any = subprocess.DEVNULL
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            out = self._log = open(self.log_path, "w", encoding="utf-8")  # noqa: SIM115 - closed in stop()
            self._log.write("$ " + shlex.join(self.argv) + "\n")
            self._log.flush()
        env = self.env if self.env is not None else child_env()
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=self.cwd, env=env)
        deadline = time.monotonic() + timeout
        last = "not started"
        try:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"{self.name} exited with code {self.proc.returncode}: {self.log_tail()}")
                try:
                    problem = ready() if ready is not None else (None if port_open(self.host, self.port) else "port not open")
                except OSError as exc:
                    problem = f"{type(exc).__name__}: {exc}"
                if problem is None:
                    return self
                last = problem
                time.sleep(0.1)
            raise RuntimeError(f"{self.name} not ready on {self.url} within {timeout:g} s ({last})")
        except BaseException:
            self.stop()
            raise

    def exited(self) -> int | None:
        """Its exit code once it has exited (None while it runs, or never started)."""
        return self.proc.poll() if self.proc is not None else None

    def log_tail(self, lines: int = 8) -> str:
        """The last lines of its output, on one line."""
        if self._log is not None:
            self._log.flush()
        return log_tail(self.log_path, lines, sep=" | ")

    def stop(self, timeout: float = 5.0) -> int | None:
        """terminate, wait, kill; close the log; the exit code (``None``: never started)."""
        code = stop_process(self.proc, timeout) if self.proc is not None else None
        if self._log is not None:
            self._log.close()
            self._log = None
        return code

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


REFERENCE_SERVER = "`mcpfast serve --transport http`"


def reference_argv(python: str, host: str, port: int) -> list[str]:
    """The command of the embedded reference server over Streamable HTTP (what ``mcpfast bench``
    measures); churn abandons sessions on purpose, so the session cap is lifted."""
    return [python, "-m", "mcpfast", "serve", "--transport", "http", "--host", host, "--port", str(port), "--max-sessions", "1000000"]


def reference_server(python: str, log_path: Path | None, *extra: str, host: str = "127.0.0.1") -> ServerProcess:
    """The embedded reference server on a free port of ``host`` (with ``extra`` options), not started yet."""
    port = free_port(host)
    return ServerProcess(REFERENCE_SERVER, [*reference_argv(python, host, port), *extra], host, port, log_path=log_path)
