"""Helpers for the headless Locust runs of ``loadtests/`` (a uniquely named plain module: test
directories have no ``__init__.py``, so ``conftest`` is not importable by name)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import mcpfast

REPO_ROOT = Path(mcpfast.__file__).resolve().parent.parent
CLIENT_TESTS = REPO_ROOT / "tests" / "client"
sys.path.insert(0, str(CLIENT_TESTS))

from _client_support import child_env, start_http_server, start_reference_server, stop  # noqa: E402, F401

LOADTESTS = str(REPO_ROOT / "loadtests")
FAKE = str(CLIENT_TESTS / "_fake_server.py")
SDK = str(CLIENT_TESTS / "_sdk_server.py")


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
        for line in lines[start + 3:]:
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

