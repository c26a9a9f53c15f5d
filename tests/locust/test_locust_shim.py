"""What the swarm asks of Locust (``mcpfast.locust.locust_shim``): a Locust outside the supported
range is refused by name; importing the swarm replaces nothing of ``locust.stats``, and setting it
up for a ``--csv`` run replaces exactly the one documented method; the history row it appends is
Locust's own.

Every check runs in a child interpreter: importing Locust gevent-patches the interpreter (see
conftest.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import mcpfast

REPO_ROOT = Path(mcpfast.__file__).resolve().parent.parent
TOOLS_CALL = str(REPO_ROOT / "mcpfast" / "loadtests" / "tools_call.py")


def _child(code: str, child_env, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=child_env())


def _supported(child_env) -> str:
    proc = _child("from mcpfast.locust.locust_shim import SUPPORTED; print(SUPPORTED)", child_env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip()


@pytest.mark.parametrize("version", ["3.0.0", "3.0.0b1", "2.41.9", "1.6.0", "unknown"])
def test_a_locust_outside_the_range_is_refused_by_name(version: str, child_env) -> None:
    code = f"import locust\nlocust.__version__ = {version!r}\nimport mcpfast.locust.users\n"
    proc = _child(code, child_env)
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("mcpfast.locust.locust_shim.UnsupportedLocust: "), proc.stderr[-3000:]
    assert "written for Locust >=2.42,<3" in last and f"the installed Locust is {version}." in last, last


def test_a_locust_run_with_an_unsupported_locust_stops_before_any_load(child_env, tmp_path: Path) -> None:
    # the locustfile is loaded by Locust itself: the refusal is what the user sees, nothing is written
    code = (
        "import sys, locust\n"
        "locust.__version__ = '3.1.0'\n"
        f"sys.argv = ['locust', '-f', {TOOLS_CALL!r}, '--headless', '-t', '1s', '--csv', 'run']\n"
        "from locust.main import main\n"
        "main()\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=child_env(), cwd=tmp_path)
    assert proc.returncode != 0
    assert "UnsupportedLocust: mcpfast's swarm is written for Locust >=2.42,<3; the installed Locust is 3.1.0." in proc.stderr
    assert not list(tmp_path.iterdir())


def test_the_supported_range_is_the_one_pyproject_pins_and_the_installed_locust_is_in_it(child_env) -> None:
    supported = _supported(child_env)
    extras = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["swarm"]
    assert [d for d in extras if d.split(">")[0].split("<")[0] == "locust"] == [f"locust{supported}"]
    proc = _child("import mcpfast.locust.users, locust; print(locust.__version__)", child_env)
    assert proc.returncode == 0, proc.stderr[-3000:]  # the installed Locust passes the check


# A fingerprint of locust.stats: every module attribute and every class attribute, by identity.
UNTOUCHED = r"""
import json, pkgutil, importlib, sys, types
import locust
import locust.stats as ls


def fingerprint():
    out = {}
    for name, value in vars(ls).items():
        out[name] = id(value)
        if isinstance(value, type) and value.__module__ == ls.__name__:
            for attr, member in vars(value).items():
                out[f"{name}.{attr}"] = id(member)
    return out


def changed(before, after):
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


before = fingerprint()
import mcpfast.locust
for info in pkgutil.iter_modules(mcpfast.locust.__path__, "mcpfast.locust."):
    importlib.import_module(info.name)
for name in ("mcpfast.loadtests._common",):
    importlib.import_module(name)
after_import = fingerprint()

# set the swarm up as `locust --csv run --json-file run` does: its options, then init
from locust.argument_parser import get_parser
from locust.env import Environment
from mcpfast.loadtests._common import McpUser

class Probe(McpUser):
    pass

options = get_parser(default_config_files=[]).parse_args(["--csv", sys.argv[1], "--json-file", sys.argv[1], "--headless"])
env = Environment(user_classes=[Probe], parsed_options=options, events=locust.events)
env.create_local_runner()
locust.events.init.fire(environment=env, runner=env.runner, web_ui=None)
after_init = fingerprint()
print(json.dumps({"modules": sorted(m for m in sys.modules if m.startswith("mcpfast.locust.")),
                  "import": changed(before, after_import), "init": changed(before, after_init)}))
"""


def test_importing_the_swarm_replaces_nothing_in_locust_stats(child_env, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", UNTOUCHED, str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=60,
        env=child_env(),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert {"mcpfast.locust.locust_shim", "mcpfast.locust.stats", "mcpfast.locust.hold"} <= set(got["modules"])
    assert got["import"] == [], got  # importing every mcpfast.locust module and the locustfiles' setup
    # setting the swarm up for a --csv/--json-file run: the one patch the shim documents
    assert got["init"] == ["StatsCSVFileWriter.stats_writer"], got


# Locust's own writer and the shim side by side on the same stats: one tick of Locust's history
# writer (its public stats_writer loop, killed after its first write) against history_rows.
HISTORY = r"""
import csv, json, sys, time
import gevent, locust
from locust.env import Environment
from locust.stats import PERCENTILES_TO_REPORT, StatsCSVFileWriter
from mcpfast.locust import locust_shim

env = Environment(events=locust.events)
env.create_local_runner()
for i in range(200):
    env.stats.log_request("mcp-http", "tools/call:echo", 0.2 + i * 0.37, 12)
env.stats.log_request("mcp-http", "DELETE", 1.5, 0)
env.stats.log_error("mcp-http", "DELETE", RuntimeError("gone"))
prefix = sys.argv[1]
writer = StatsCSVFileWriter(env, PERCENTILES_TO_REPORT, prefix, full_history=True)
now = time.time()
g = gevent.spawn(writer.stats_writer)
gevent.sleep(0.2)
g.kill()
writer.close_files()
with open(writer.stats_history_file_name(), newline="") as fh:
    rows = list(csv.reader(fh))
ours = [[str(v) for v in row] for row in locust_shim.history_rows(env, now, full_history=True)]

# the writer loop on files closed under it: Locust's fails, the shim's (from init on) ends quietly
def run_loop():
    loop = gevent.spawn(writer.stats_writer)
    loop.join()
    return None if loop.exception is None else type(loop.exception).__name__

before = run_loop()
locust_shim.quiet_writer_loop()
locust_shim.quiet_writer_loop()  # once: not a wrapper of its wrapper
after = run_loop()
print(json.dumps({"header": rows[0], "columns": locust_shim.HISTORY_COLUMNS, "locust": [r[1:] for r in rows[1:]],
                  "ours": [r[1:] for r in ours], "loop": [before, after],
                  "wrapped_once": StatsCSVFileWriter.stats_writer.__wrapped__.__name__ == "stats_writer"
                  and not hasattr(StatsCSVFileWriter.stats_writer.__wrapped__, "__wrapped__")}))
"""


def test_the_history_row_it_appends_is_the_one_locust_writes(child_env, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", HISTORY, str(tmp_path / "h")], capture_output=True, text=True, timeout=60, env=child_env(), cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["header"] == got["columns"]
    assert len(got["locust"]) == 3  # DELETE, tools/call:echo, Aggregated (full history)
    assert got["ours"] == got["locust"]  # every column but the timestamp
    assert got["loop"] == ["ValueError", None] and got["wrapped_once"]
