"""The process helpers of ``mcpfast bench``: machine info, RSS, free ports, server processes, logs.

``mcpfast bench`` and the maintainer benchmarks (``benchmarks/``, which add pinning and CPU
time on top) measure processes the same way, so the figures they print are comparable:

* :func:`machine_info`: where the numbers were taken (CPU, memory, load, versions);
* :func:`rss_kib` (the client's): ``VmRSS`` from ``/proc/<pid>/status``; :func:`child_pids`,
  :func:`process_tree` and :func:`tree_rss_kib` (a server and the workers it forks);
* :func:`loadavg` and :func:`machine_was_busy`: whether other work shared the machine;
* :func:`free_port`, :func:`port_open`, :func:`wait_port`; :func:`stop_process`;
* :func:`log_path` (logs go to an ignored ``logs/`` folder beside the results) and :func:`log_tail`;
* :func:`write_json` / :func:`write_summary` / :func:`read_json`: every benchmark's results file,
  written the same way (atomically, indented, paths and dataclasses as JSON) and read back;
* :class:`ServerProcess`: a server process on a port (started, waited for, stopped), the one
  class for it; :func:`reference_server` is the embedded reference server over Streamable HTTP.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, TextIO

from mcpfast.client.base import rss_kib  # the swarm measures it too; one definition

__all__ = [
    "BUSY_START_SHARE",
    "REFERENCE_SERVER",
    "ServerProcess",
    "child_env",
    "child_pids",
    "cpu_model",
    "cpus_available",
    "free_port",
    "least_squares",
    "loadavg",
    "log_path",
    "log_tail",
    "machine_info",
    "machine_was_busy",
    "port_open",
    "process_tree",
    "read_json",
    "reference_argv",
    "reference_server",
    "repo_root",
    "rss_kib",
    "stop_process",
    "tree_rss_kib",
    "wait_port",
    "write_json",
    "write_summary",
]

SERVER_START_TIMEOUT = 20.0
LOGS = "logs"
"""The folder (beside a run's results) that takes its logs; ``.gitignore`` keeps it out of git."""


def repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


def child_env() -> dict[str, str]:
    """The environment of a benchmark's child process: this checkout first on ``PYTHONPATH``."""
    env = dict(os.environ)
    root = str(repo_root())
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


# ------------------------------------------------------------------------------------ machine


def cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _mem_total_kib() -> int | None:
    try:
        with open("/proc/meminfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def cpus_available() -> int:
    """CPUs this process may run on (its affinity), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover
        return os.cpu_count() or 1


BUSY_START_SHARE = 0.5
"""A 1-minute load average above this share of the CPUs before a run: other work was running."""


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
    try:
        load: list[float] | None = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    info: dict[str, Any] = {
        "nproc": cpus_available(),
        "cpu_count": os.cpu_count(),
        "cpu_model": cpu_model(),
        "mem_total_kib": _mem_total_kib(),
        "platform": platform.platform(),
        "kernel": platform.release(),
        "hostname": platform.node(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "python_executable": sys.executable,
        "loadavg": load,
        "loadavg_at_start": load,
    }
    from mcpfast._version import __version__

    info["mcpfast_version"] = __version__
    info["mcpfast_core_env"] = os.environ.get("MCPFAST_CORE") or None
    try:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from mcpfast.core import IMPLEMENTATION

        info["mcpfast_core"] = IMPLEMENTATION
    except Exception as exc:  # pragma: no cover - broken core
        info["mcpfast_core"] = f"unavailable: {exc}"
    from importlib.metadata import PackageNotFoundError, version

    for mod in modules:
        try:
            info[f"{mod}_version"] = version(mod)
        except PackageNotFoundError:
            info[f"{mod}_version"] = None
    return info


# ---------------------------------------------------------------------------------- processes


def child_pids(pid: int) -> list[int]:
    """Direct children of ``pid`` (Linux ``/proc/PID/task/*/children``)."""
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as fh:
                out.extend(int(x) for x in fh.read().split())
        except (OSError, ValueError):
            continue
    return out


def process_tree(pid: int) -> list[int]:
    """``pid`` and every process below it (granian serves from a worker process it forks)."""
    found = [pid]
    for child in child_pids(pid):
        found.extend(process_tree(child))
    return found


def tree_rss_kib(pid: int) -> int | None:
    """Summed ``VmRSS`` (KiB) of ``pid`` and every process below it; None once ``pid`` is gone."""
    total: int | None = None
    for p in process_tree(pid):
        rss = rss_kib(p)
        if rss is not None:
            total = (total or 0) + rss
    return total


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


# --------------------------------------------------------------------------------------- logs


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


# ----------------------------------------------------------------------------------- results


def _json_default(obj: Any) -> Any:
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "__dataclass_fields__"):
        return asdict(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def write_json(path: Path, data: Any) -> None:
    """Write a results file atomically (a reader never sees half of it): indented, newline-ended."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, default=_json_default)
        fh.write("\n")
    os.replace(tmp, path)


def write_summary(out: Path, summary: dict[str, Any]) -> None:
    """``<out>/summary.json``."""
    write_json(out / "summary.json", summary)


def read_json(path: Path) -> Any:
    """A results file's data; None when it is missing or not JSON."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


# ------------------------------------------------------------------------------ the server


class ServerProcess:
    """A server process listening on ``host:port``: the one class the benchmarks start servers with.

    Its output goes to ``log_path`` (first line: the command; ``None``: discarded). ``start``
    waits until ``ready`` says so (by default: the port accepts) and raises ``RuntimeError``,
    having stopped it, when the process exits first or the wait times out; ``stop`` terminates,
    waits and kills. A context manager: leaving the block stops it.

    Attributes:
        name: what to call it in messages (a peer's name, the reference server's command).
        argv: the command (behind ``taskset`` when the caller pinned it to ``cpus``).
        cpus: the CPU list it is pinned to (``None``: not pinned).
        reply_mode: how it answers HTTP POSTs (``json+sse``, ``json``, ``sse``), when known.
        cwd: its working directory (default: this checkout; ``python -m`` imports from there first).
        proc: the process, once started.
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        host: str,
        port: int,
        *,
        log_path: Path | None = None,
        cpus: str | None = None,
        reply_mode: str | None = None,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.host = host
        self.port = port
        self.log_path = log_path
        self.cpus = cpus
        self.reply_mode = reply_mode
        self.env = env
        self.cwd = cwd if cwd is not None else repo_root()
        self.proc: subprocess.Popen[Any] | None = None
        self._log: TextIO | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/mcp"

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc is not None else 0

    def _port_ready(self) -> str | None:
        return None if port_open(self.host, self.port) else f"{self.host}:{self.port} not open"

    def start(self, timeout: float = SERVER_START_TIMEOUT, ready: Callable[[], str | None] | None = None) -> ServerProcess:
        """Start it and wait until ``ready()`` returns ``None`` (else it says what is missing).

        Raises:
            RuntimeError: the process exited, or was not ready within ``timeout`` seconds
                (it is stopped first).
        """
        check = ready if ready is not None else self._port_ready
        out: Any = subprocess.DEVNULL
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            out = self._log = open(self.log_path, "w", encoding="utf-8")  # noqa: SIM115 - closed in stop()
            self._log.write("$ " + shlex.join(self.argv) + "\n")
            self._log.flush()
        env = self.env if self.env is not None else child_env()
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=str(self.cwd), env=env)
        deadline = time.monotonic() + timeout
        last = "not started"
        try:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"{self.name} exited with code {self.proc.returncode}: {self.log_tail()}")
                try:
                    problem = check()
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

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


REFERENCE_SERVER = "`mcpfast serve --transport http`"


def reference_argv(python: str, host: str, port: int) -> list[str]:
    """The command of the embedded reference server over Streamable HTTP (what ``mcpfast bench`` measures)."""
    argv = [python, "-m", "mcpfast", "serve", "--transport", "http", "--host", host, "--port", str(port)]
    # Churn abandons sessions on purpose: lift the session cap when the CLI has the option.
    if "--max-sessions" in _serve_help(python):
        argv += ["--max-sessions", "1000000"]
    return argv


def reference_server(python: str, log_path: Path | None, host: str = "127.0.0.1", port: int | None = None) -> ServerProcess:
    """The embedded reference server on ``host:port`` (a free port by default), not started yet."""
    port = port or free_port(host)
    return ServerProcess(REFERENCE_SERVER, reference_argv(python, host, port), host, port, log_path=log_path, reply_mode="json+sse")


_HELP_CACHE: dict[str, str] = {}


def _serve_help(python: str) -> str:
    if python not in _HELP_CACHE:
        try:
            out = subprocess.run([python, "-m", "mcpfast", "serve", "--help"], capture_output=True, text=True, timeout=30, env=child_env())
            _HELP_CACHE[python] = out.stdout + out.stderr
        except (OSError, subprocess.TimeoutExpired):
            _HELP_CACHE[python] = ""
    return _HELP_CACHE[python]


def least_squares(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float, float] | None:
    """Least squares ``y = a + b x``: ``(a, b, the spread of x)`` (the sum of its squared
    deviations); None below 2 points or when x does not vary."""
    n = len(xs)
    if n < 2 or n != len(ys):
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx <= 0:
        return None
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    return my - b * mx, b, sxx
