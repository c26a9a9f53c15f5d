"""parse_http of one 8-field MCP POST: the pure-Python twin before the strict parser (from git),
the strict twin, and the Rust binding; best of 5 x 20,000 calls. Run from the repository root:

    flock /tmp/mcpfast-bench.lock python -m benchmarks.twin_timing

The process pins itself to the generator CPU; the load average is printed before and after.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import subprocess
import sys
import tempfile
import timeit
from types import ModuleType

from benchmarks.harness import GENERATOR_CPU, ROOT, affinity, loadavg, machine_was_busy
from mcpfast.core import load

BEFORE = "282370f"  # the last commit with the hand-written fast path and its twin
CALL = (
    b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nContent-Type: application/json\r\n"
    b"Accept: application/json, text/event-stream\r\nMcp-Session-Id: 6f1c2d0e9a8b4c7d9e0f1a2b3c4d5e6f\r\n"
    b"MCP-Protocol-Version: 2025-11-25\r\nUser-Agent: mcpfast-load/0.1\r\nContent-Length: 2\r\n\r\n{}"
)


def twin_at(rev: str) -> ModuleType:
    """``mcpfast/core/_python.py`` as it was at ``rev``, imported from a temporary file."""
    source = subprocess.run(["git", "show", f"{rev}:mcpfast/core/_python.py"], capture_output=True, check=True, cwd=ROOT).stdout
    with tempfile.NamedTemporaryFile("wb", suffix=".py", delete=False) as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location("twin_before", f.name)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot import the twin of {rev}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.twin_timing", description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default=BEFORE, help="the commit whose pure-Python twin is timed first")
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args(argv)
    start = loadavg()
    print("load average", start)
    impls = (("python twin, before", twin_at(args.before)), ("python twin, strict", load("python")), ("rust binding, strict", load("rust")))
    with affinity(GENERATOR_CPU):
        for name, impl in impls:
            best = min(timeit.repeat(functools.partial(impl.parse_http, CALL), number=args.calls, repeat=5)) / args.calls
            print(f"{name}: {best * 1e6:.2f} us per call")
    end = loadavg()
    print("load average", end, "(the machine was busy)" if machine_was_busy(start, end) else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
