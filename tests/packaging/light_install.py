"""`make check-light`: the wheel, installed into a fresh venv, is the light server package, and
with ``[swarm,bench]`` the whole swarm.

The wheel's files: no ``benchmarks/`` (the maintainer tools stay in the repository) and in
``mcpfast/bench/`` exactly the modules of ``mcpfast bench``/``capacity`` and ``make demo``
(:data:`PRODUCT_BENCH`, under :data:`BENCH_MAX_LINES` lines) and in ``mcpfast/results/`` those of
the pages, ``report`` and ``compare`` (:data:`PRODUCT_RESULTS`), both importing nothing from
``benchmarks`` or ``tests`` and building nothing with cargo (:func:`bench_problems`,
:func:`results_problems`).

Light: it must pull no Locust, gevent, geventhttpclient, matplotlib, numpy or uvicorn; ``mcpfast
serve`` must answer an ``initialize`` over stdio and over HTTP (the native server); a command that
needs an extra must say which one to install. Then the same wheel with ``[swarm,bench]``, as a
user who never cloned the repository has it: the wheel carries the locustfiles, ``mcpfast
locustfiles`` names their folder, and ``mcpfast bench --quick`` runs its main job from an empty
folder. Every step is bounded in time.

Usage: python tests/packaging/light_install.py VENV_DIR  (the venv is created, or reused when
``--reuse`` is given and it exists).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import venv
import zipfile
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ("README.md", "_common.py", "tools_call.py", "handshake.py", "session_churn.py", "sse_streaming.py", "scenario.py")
PRODUCT_BENCH = (
    "__init__.py",
    "capacity.py",
    "cli.py",
    "core_demo.py",
    "procs.py",
    "run.py",
    "soak.py",
    "traffic.py",
)
"""The Python modules of ``mcpfast/bench/`` in the wheel: the commands that run loads (``--soak``
and ``mcpfast capacity`` included) and ``make demo``'s table."""
BENCH_MAX_LINES = 2500
PRODUCT_RESULTS = ("__init__.py", "compare.py", "files.py", "noise.py", "page.py", "plots.py", "report.py")
"""The Python modules of ``mcpfast/results/`` in the wheel: what reads and shows a run's files
(``report.html``, ``mcpfast report`` and ``compare``, the plots)."""
MAINTAINER_ONLY = (b"from benchmarks", b"import benchmarks", b"from tests", b"import tests", b'"cargo"')
"""What no shipped bench module may hold: imports of the repository's tools or tests, a cargo build."""
HEAVY = ("locust", "gevent", "geventhttpclient", "matplotlib", "numpy", "uvicorn", "httptools")
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "light", "version": "1"}},
}


def bench_problems(files: Mapping[str, bytes]) -> list[str]:
    """What is wrong with a wheel's benchmark files (``files``: each archive name and its content),
    ``[]`` when it ships the product's ``mcpfast/bench/`` modules and no maintainer tool."""
    problems = [f"ships the maintainer tool {name}" for name in sorted(files) if name.split("/")[0] == "benchmarks"]
    bench = {name.rsplit("/", 1)[1]: data for name, data in files.items() if name.startswith("mcpfast/bench/") and name.endswith(".py")}
    if sorted(bench) != sorted(PRODUCT_BENCH):
        extra, missing = sorted(set(bench) - set(PRODUCT_BENCH)), sorted(set(PRODUCT_BENCH) - set(bench))
        problems.append(f"mcpfast/bench/ is not the product's modules (extra {extra}, missing {missing})")
    lines = sum(data.count(b"\n") for data in bench.values())
    if lines >= BENCH_MAX_LINES:
        problems.append(f"mcpfast/bench/ has {lines} lines (at most {BENCH_MAX_LINES - 1})")
    for name, data in sorted(bench.items()):
        problems += [f"mcpfast/bench/{name} holds {bad.decode()!r}" for bad in MAINTAINER_ONLY if bad in data]
    return problems


def results_problems(files: Mapping[str, bytes]) -> list[str]:
    """What is wrong with a wheel's ``mcpfast/results/`` (``files``: each archive name and its
    content), ``[]`` when it ships exactly :data:`PRODUCT_RESULTS` and no maintainer tool."""
    found = {name.rsplit("/", 1)[1]: data for name, data in files.items() if name.startswith("mcpfast/results/") and name.endswith(".py")}
    problems = []
    if sorted(found) != sorted(PRODUCT_RESULTS):
        extra, missing = sorted(set(found) - set(PRODUCT_RESULTS)), sorted(set(PRODUCT_RESULTS) - set(found))
        problems.append(f"mcpfast/results/ is not the product's modules (extra {extra}, missing {missing})")
    for name, data in sorted(found.items()):
        problems += [f"mcpfast/results/{name} holds {bad.decode()!r}" for bad in MAINTAINER_ONLY if bad in data]
    return problems


def check(ok: bool, what: str) -> None:
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        sys.exit(1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def build_wheel(wheels: Path) -> list[str]:
    """The command that builds the wheel from the checkout into ``wheels``: the project's maturin
    when ``make install`` put one in ``.venv`` (the same build ``pip wheel .`` runs through
    maturin's PEP 517 backend, for the interpreter of ``.venv``, so its release build of the
    extension is reused, not compiled a second time), else ``pip wheel .``."""
    maturin = ROOT / ".venv" / "bin" / "maturin"
    if maturin.exists():
        return [
            str(maturin),
            "build",
            "--release",
            "--quiet",
            "--out",
            str(wheels),
            "--interpreter",
            str(ROOT / ".venv" / "bin" / "python"),
        ]
    return [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(wheels), str(ROOT)]


def main(argv: list[str]) -> int:
    target = Path(argv[0]).resolve()
    reuse = "--reuse" in argv
    python = target / "bin" / "python"
    wheels = target.parent / (target.name + "-wheel")
    if not (reuse and python.exists() and list(wheels.glob("mcpfast-*.whl"))):
        shutil.rmtree(wheels, ignore_errors=True)
        venv.EnvBuilder(clear=True, with_pip=True).create(target)
        subprocess.run(build_wheel(wheels), check=True, timeout=1800, cwd=ROOT)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", str(_wheel(wheels))], check=True, timeout=600)
    wheel = _wheel(wheels)
    with zipfile.ZipFile(wheel) as z:
        shipped = set(z.namelist())
        benchmark_files = {n: z.read(n) for n in shipped if n.startswith(("mcpfast/bench/", "benchmarks/"))}
        results_files = {n: z.read(n) for n in shipped if n.startswith("mcpfast/results/")}
    missing = [f"mcpfast/loadtests/{name}" for name in SHIPPED if f"mcpfast/loadtests/{name}" not in shipped]
    check(not missing, f"the wheel ships the locustfiles (missing: {missing or 'none'})")
    page = [f"mcpfast/locust/webui_static/{p.name}" for p in (ROOT / "mcpfast" / "locust" / "webui_static").iterdir()]
    check(not set(page) - shipped, f"the wheel ships the web UI's MCP page (missing: {sorted(set(page) - shipped) or 'none'})")
    problems = bench_problems(benchmark_files)
    check(not problems, f"the wheel ships no benchmark tool, mcpfast/bench/ is the product's ({'; '.join(problems) or 'so it is'})")
    problems = results_problems(results_files)
    check(not problems, f"mcpfast/results/ is the product's ({'; '.join(problems) or 'so it is'})")
    listed = subprocess.run([str(python), "-m", "pip", "list", "--format=json"], check=True, capture_output=True, text=True, timeout=120)
    installed = {p["name"].lower() for p in json.loads(listed.stdout)}
    check("mcpfast" in installed, "mcpfast is installed")
    heavy = sorted(set(HEAVY) & installed)
    check(not heavy, f"no swarm/bench/uvicorn dependency pulled (found: {heavy or 'none'})")
    mcpfast = str(target / "bin" / "mcpfast")

    line = json.dumps(INIT) + "\n"
    out = subprocess.run([mcpfast, "serve"], input=line, capture_output=True, text=True, timeout=60)
    reply = json.loads(out.stdout.splitlines()[0]) if out.stdout else {}
    check(reply.get("id") == 1 and "serverInfo" in reply.get("result", {}), "mcpfast serve (stdio) answers initialize")

    port = free_port()
    server = subprocess.Popen(
        [mcpfast, "serve", "--transport", "http", "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        answer: dict[str, object] = {}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not answer:
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}/mcp",
                data=json.dumps(INIT).encode(),
                method="POST",
                headers={"Accept": "application/json, text/event-stream", "Content-Type": "application/json"},
            )
            try:
                with urllib.request.urlopen(request, timeout=5) as r:
                    answer = json.loads(r.read())
            except OSError:
                time.sleep(0.2)
        check(answer.get("id") == 1, "mcpfast serve --transport http (native) answers initialize")
    finally:
        server.terminate()
        server.wait(timeout=10)

    out = subprocess.run([mcpfast, "bench", "--quick"], capture_output=True, text=True, timeout=60)
    check(out.returncode == 2 and "pip install 'mcpfast[swarm]'" in out.stderr, "mcpfast bench names the swarm extra")
    out = subprocess.run([mcpfast, "serve", "--transport", "http", "--runner", "uvicorn"], capture_output=True, text=True, timeout=60)
    check(out.returncode == 2 and "pip install 'mcpfast[uvicorn]'" in out.stderr, "--runner uvicorn names the uvicorn extra")
    return swarm_from_wheel(target, wheel)


def _wheel(folder: Path) -> Path:
    found = sorted(folder.glob("mcpfast-*.whl"))
    check(len(found) == 1, f"one mcpfast wheel in {folder} (found {[p.name for p in found]})")
    return found[0]


def swarm_from_wheel(target: Path, wheel: Path) -> int:
    """The pip user's swarm: ``[swarm,bench]`` from the same wheel, run from a folder with no checkout."""
    python = target / "bin" / "python"
    mcpfast = str(target / "bin" / "mcpfast")
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", f"{wheel}[swarm,bench]"], check=True, timeout=900)
    out = subprocess.run([mcpfast, "locustfiles"], capture_output=True, text=True, timeout=60)
    folder = Path(out.stdout.strip())
    check(
        out.returncode == 0 and folder.is_relative_to(target) and (folder / "tools_call.py").is_file(),
        f"mcpfast locustfiles names the installed folder ({folder})",
    )
    check("tools_call" in out.stderr and "_common" not in out.stderr, "mcpfast locustfiles lists the families, not the helpers")
    with tempfile.TemporaryDirectory(prefix="mcpfast-pip-user-") as empty:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        env["PATH"] = str(target / "bin") + os.pathsep + env.get("PATH", "")
        run = subprocess.run(
            [mcpfast, "bench", "--quick", "--duration", "2", "--out", "run"],
            cwd=empty,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        summaries = list(Path(empty, "run").glob("**/summary.json"))
        if run.returncode != 0 or not summaries:
            print(run.stdout[-4000:], run.stderr[-4000:], sep="\n", file=sys.stderr)
        check(run.returncode == 0, f"mcpfast bench --quick from an empty folder exits 0 (exit {run.returncode})")
        check(len(summaries) == 1, "mcpfast bench --quick wrote its summary in the empty folder")
        summary = json.loads(summaries[0].read_text())
        ran = {(f["family"], f["transport"]) for f in summary["families"] if f.get("requests")}
        want = {(f, t) for f in ("handshake", "tools_call", "sse_streaming", "session_churn") for t in ("stdio", "http")}
        check(summary["ok"] and ran == want, f"every family ran with requests on both transports (ran {sorted(ran)})")
        check(sum(f["failures"] for f in summary["families"]) == 0, "and without failures")
        pip_user_https(Path(empty), target, env, folder)
    return 0


def pip_user_https(folder: Path, target: Path, env: dict[str, str], locustfiles: Path) -> None:
    """The README's pip-user command against an https server: ``mcpfast serve --tls-*`` with a
    CA made here by the ``openssl`` command, the locustfile from the installed package."""
    curve = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes")
    for args in (
        ("req", "-x509", *curve, "-keyout", "ca.key", "-out", "ca.pem", "-subj", "/CN=light CA", "-days", "1"),
        ("req", *curve, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1"),
    ):
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)
    (folder / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    subprocess.run(
        ["openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial"]
        + ["-out", "server.pem", "-days", "1", "-extfile", "san.ext"],
        cwd=folder,
        check=True,
        capture_output=True,
    )
    port = free_port()
    serve = [str(target / "bin" / "mcpfast"), "serve", "--transport", "http", "--host", "127.0.0.1", "--port", str(port)]
    server = subprocess.Popen([*serve, "--tls-cert", "server.pem", "--tls-key", "server.key"], cwd=folder, env=env)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                check(time.monotonic() < deadline and server.poll() is None, "mcpfast serve --tls-cert listens")
                time.sleep(0.2)
        locust = [str(target / "bin" / "locust"), "-f", str(locustfiles / "tools_call.py"), "--headless", "-u", "4", "-r", "4"]
        locust += ["-t", "3s", "--host", f"https://127.0.0.1:{port}/mcp", "--mcp-ca-file", "ca.pem", "--csv", "https"]
        run = subprocess.run(locust, cwd=folder, env=env, capture_output=True, text=True, timeout=120)
        if run.returncode != 0:
            print(run.stdout[-4000:], run.stderr[-4000:], sep="\n", file=sys.stderr)
        check(run.returncode == 0, f"the README's pip-user locust command against https exits 0 (exit {run.returncode})")
        hist = json.loads((folder / "https_histograms.json").read_text())
        calls = sum(h["n"] for h in hist["histograms"] if h["name"] == "tools/call:echo")
        handshakes = sum(h["n"] for h in hist["histograms"] if h["name"] == "tls:handshake")
        check(
            calls > 0 and not hist["failed_histograms"] and handshakes == 4,
            f"tools/call over TLS: {calls} calls, 0 failures, {handshakes} handshakes",
        )
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
