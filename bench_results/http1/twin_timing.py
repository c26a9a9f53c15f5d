"""parse_http of one 8-field MCP POST: the pure-Python twin before issue 12 (from git), the strict
twin, and the Rust binding; best of 5 x 20,000 calls. Run from the repository root:

    flock /tmp/mcpfast-bench.lock taskset -c 1 .venv/bin/python bench_results/http1/twin_timing.py
"""

import importlib.util
import os
import subprocess
import sys
import tempfile
import timeit

sys.path.insert(0, os.getcwd())
from mcpfast.core import load  # noqa: E402

BEFORE = "282370f"  # the last commit with the hand-written fast path and its twin
source = subprocess.run(["git", "show", f"{BEFORE}:mcpfast/core/_python.py"], capture_output=True, check=True).stdout
with tempfile.NamedTemporaryFile("wb", suffix=".py", delete=False) as f:
    f.write(source)
spec = importlib.util.spec_from_file_location("twin_before", f.name)
assert spec is not None and spec.loader is not None
before = importlib.util.module_from_spec(spec)
spec.loader.exec_module(before)

CALL = (
    b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nContent-Type: application/json\r\n"
    b"Accept: application/json, text/event-stream\r\nMcp-Session-Id: 6f1c2d0e9a8b4c7d9e0f1a2b3c4d5e6f\r\n"
    b"MCP-Protocol-Version: 2025-11-25\r\nUser-Agent: mcpfast-load/0.1\r\nContent-Length: 2\r\n\r\n{}"
)
print("load average", os.getloadavg())
for name, impl in (("python twin, before", before), ("python twin, strict", load("python")), ("rust binding, strict", load("rust"))):
    best = min(timeit.repeat(lambda impl=impl: impl.parse_http(CALL), number=20000, repeat=5)) / 20000
    print(f"{name}: {best * 1e6:.2f} us per call")
print("load average", os.getloadavg())
