"""Helpers for the headless Locust runs of ``loadtests/`` (a uniquely named plain module: test
directories have no ``__init__.py``, so ``conftest`` is not importable by name)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

from _support import FAKE, REPO_ROOT, SDK, child_env, free_port, start_http_server, start_process, start_reference_server, stop  # noqa: F401

LOADTESTS = str(REPO_ROOT / "loadtests")


class Run:
    def __init__(self, prefix: Path, proc: subprocess.CompletedProcess) -> None:
        self.prefix = prefix
        self.proc = proc
        self.output = proc.stdout + proc.stderr

    def stats(self) -> dict[tuple[str, str], dict[str, str]]:
        with open(f"{self.prefix}_stats.csv", newline="") as fh:
            return {(r["Type"], r["Name"]): r for r in csv.DictReader(fh) if r["Name"] != "Aggregated"}

    def failures(self) -> dict[tuple[str, str], int]:
        """``{(type, name): failure count}`` from the mcpfast histograms (written at test stop; Locust's
        CSVs are rewritten once a second and may miss the end of a short run)."""
        return {(h["type"], h["name"]): h["summary"]["count"] for h in self.histograms()["failed_histograms"]}

    def errors(self) -> list[str]:
        """Lines of Locust's final "Error report" (``<type> <name>: <repr(exception)>``)."""
        lines = self.output.splitlines()
        try:
            start = max(i for i, line in enumerate(lines) if line.startswith("Error report"))
        except ValueError:
            return []
        out = []
        for line in lines[start + 3 :]:
            if line.startswith("---"):
                break
            out.append(line.split(None, 1)[1].strip() if line.strip() else "")
        return [line for line in out if line]

    def histograms(self) -> dict:
        return json.loads(Path(f"{self.prefix}_histograms.json").read_text())

    def summary(self, request_type: str, name: str) -> dict:
        for h in self.histograms()["histograms"]:
            if (h["type"], h["name"]) == (request_type, name):
                return h["summary"]
        raise KeyError((request_type, name))


LOCUSTS_DIR = LOADTESTS


def locust_command(locustfile: str, prefix: Path, *args: str) -> list[str]:
    """A headless ``locust`` run of ``locustfile`` writing its CSVs (and histograms) at ``prefix``."""
    return [
        sys.executable,
        "-m",
        "locust",
        "-f",
        locustfile,
        "--headless",
        "--csv",
        str(prefix),
        "--only-summary",
        "--stop-timeout",
        "3",
        *args,
    ]


COUNTING = str(Path(__file__).resolve().parent / "_counting_servers.py")


def start_counting_server(
    kind: str, tmp: Path, *args: str, lifetime: int = 120, port: int | None = None, host: str = "127.0.0.1"
) -> tuple[subprocess.Popen, str, Path]:
    """``mcpfast`` or ``sdk`` (peers/python_sdk) HTTP server with the ``counted`` tool on
    ``port`` (default a free one) of ``host`` (loopback, IPv4 or IPv6); returns (process,
    endpoint URL, count file)."""
    port = port or free_port(host)
    countfile = tmp / f"count-{kind}-{port}"
    countfile.write_bytes(b"")
    extra = ["--transport", "http", "--host", host, "--port", str(port), *args]
    cmd = ["timeout", str(lifetime), sys.executable, COUNTING, kind, str(countfile), *extra]
    proc = start_process(cmd, port, f"counting server {kind}", env=child_env(), host=host)
    name = f"[{host}]" if ":" in host else host
    return proc, f"http://{name}:{port}/mcp", countfile


def stdio_counting_command(countfile: Path) -> str:
    return f"{sys.executable} {COUNTING} mcpfast {countfile} --transport stdio"


def console_counts(output: str) -> dict[tuple[str, str], int]:
    """``{(type, name): requests}`` from Locust's final console table (the last one printed)."""
    import re

    lines = output.splitlines()
    starts = [i for i, line in enumerate(lines) if re.match(r"^Type\s+Name\s+# reqs", line.split("] ")[-1])]
    if not starts:
        return {}
    out: dict[tuple[str, str], int] = {}
    for line in lines[starts[-1] + 2 :]:
        line = line.split("] ")[-1] if "] " in line[:40] else line
        if line.startswith("---") or not line.strip():
            break
        m = re.match(r"^(\S+)\s+(.+?)\s+(\d+)\s+\d+\(", line.split("|")[0])
        if m:
            out[(m.group(1), m.group(2))] = int(m.group(3))
    return out


def html_counts(path: Path) -> dict[tuple[str, str], int]:
    """``{(type, name): requests}`` from Locust's HTML report (its embedded template arguments)."""
    import re

    text = path.read_text()
    m = re.search(r"window\.templateArgs\s*=\s*(\{.*?\})\s*\n", text, re.S)
    if not m:
        raise AssertionError("no templateArgs in the HTML report")
    data = json.loads(m.group(1))
    return {(r["method"], r["name"]): int(r["num_requests"]) for r in data["requests_statistics"] if r["name"] != "Aggregated"}


def all_counts(run: Run, html: Path | None = None) -> dict[str, dict[tuple[str, str], int]]:
    """The same run's request counts per (type, name) from every output: CSV, console, histograms
    (successes + failures) and, if written, the HTML report."""
    hist = run.histograms()
    from_hist: dict[tuple[str, str], int] = {}
    for h in hist["histograms"] + hist["failed_histograms"]:
        key = (h["type"], h["name"])
        from_hist[key] = from_hist.get(key, 0) + int(h["n"])
    out = {
        "csv": {k: int(r["Request Count"]) for k, r in run.stats().items()},
        "console": console_counts(run.output),
        "histograms": from_hist,
    }
    if not out["console"]:  # --json / --json-file: Locust prints no final table
        del out["console"]
    if html is not None:
        out["html"] = html_counts(html)
    json_file = Path(f"{run.prefix}_locust.json")
    if json_file.exists():  # --json-file (what mcpfast bench reads)
        out["json"] = {(e["method"], e["name"]): int(e["num_requests"]) for e in json.loads(json_file.read_text())}
    return out
