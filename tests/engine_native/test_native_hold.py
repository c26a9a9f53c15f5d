"""The native engine's ``hold`` family with GET streams (``hold_streams``) and its fan-out trigger,
against ``loadtests/_broadcast_server.py`` with ``--metrics``: the engine's counts are the server's
own, method by method; a shared trigger clock lets a listening-only engine measure against another
engine's trigger; bad values are refused naming the field."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _native_runs import run_engines, scrape
from _support import REPO_ROOT, child_env, free_port, metric, start_process, stop, wait_until

from mcpfast import core

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(not core.HAS_NATIVE_ENGINE, reason="the native engine needs the compiled core"),
]

BROADCAST = str(REPO_ROOT / "loadtests" / "_broadcast_server.py")


@pytest.fixture
def broadcast() -> Iterator[str]:
    """The broadcast server with ``/metrics``; yields its base URL."""
    port = free_port()
    cmd = ["timeout", "60", sys.executable, BROADCAST, "--transport", "http", "--host", "127.0.0.1", "--port", str(port), "--metrics"]
    proc = start_process(cmd, port, "broadcast server", env=child_env())
    yield f"http://127.0.0.1:{port}"
    stop(proc)


def hold_config(base: str, **kw: Any) -> Any:
    return core.EngineConfig(family="hold", url=base + "/mcp", hold_delete=False, **kw)


def test_held_streams_and_fanout_counted_as_the_server_counts(broadcast: str) -> None:
    eng = core.native_engine(hold_config(broadcast, hold_streams=5, hold_trigger="broadcast", hold_trigger_every_s=0.4))
    (totals,) = run_engines([eng], [4], 3.0)
    fanout = eng.fanout()
    streams = 4 * 5
    # the server counts a GET stream when it ends, which is when it reads its client's close:
    # the engine's stop and the server's count of its streams are not one instant
    wait_until(lambda: metric(scrape(broadcast), "mcpfast_http_requests_total", method="GET", status="200") >= streams, timeout=10)
    text = scrape(broadcast)
    assert all(f == 0 for _, f in totals.values()), totals
    ok = {name: n for name, (n, _) in totals.items()}
    # the server's counts, method by method: every listener's session, and the trigger's own
    assert ok["initialize"] == streams + 1 == metric(text, "mcpfast_http_requests_total", method="initialize", status="200")
    assert (
        ok["notifications/initialized"]
        == streams + 1
        == metric(text, "mcpfast_http_requests_total", method="notifications/initialized", status="202")
    )
    assert ok["GET:open"] == streams == metric(text, "mcpfast_http_requests_total", method="GET", status="200")
    assert (
        ok["tools/call:broadcast"] == fanout["triggers"] == metric(text, "mcpfast_http_requests_total", method="tools/call", status="200")
    )
    assert metric(text, "mcpfast_http_requests_total", method="DELETE", status="200") <= 1  # the trigger's session, if the stop left time
    rounds = fanout["rounds"]
    assert fanout["triggers"] >= 2 and len(rounds) >= 1
    # every complete round reached every stream once (a round in flight at the stop may add part of one)
    assert streams * len(rounds) <= ok["hold:fanout"] <= streams * fanout["triggers"]
    assert ok["hold:fanout-all"] == len(rounds)
    assert all(us > 0 for _, us in rounds), rounds
    assert ok["GET:event"] == ok["hold:fanout"]  # the broadcast is the only event on the streams


def test_a_shared_clock_lets_another_engine_measure_the_same_trigger(broadcast: str, tmp_path: Path) -> None:
    clock = str(tmp_path / "hold.clock")
    trigger = core.native_engine(
        hold_config(broadcast, hold_streams=3, hold_trigger="broadcast", hold_trigger_every_s=0.4, hold_clock=clock)
    )
    listener = core.native_engine(hold_config(broadcast, hold_streams=3, hold_clock=clock))
    a, b = run_engines([trigger, listener], [2, 2], 2.5)
    fa, fb = trigger.fanout(), listener.fanout()
    assert fa["triggers"] >= 2 and fb["triggers"] == 0
    assert "tools/call:broadcast" not in b
    # the listening engine's rounds are the trigger's (numbered by it), each timed from its send
    assert fb["rounds"] and {r for r, _ in fb["rounds"]} <= set(range(1, fa["triggers"] + 1))
    assert b["hold:fanout"][0] >= 6 * len(fb["rounds"]) and b["hold:fanout-all"][0] == len(fb["rounds"])
    assert a["hold:fanout"][1] == b["hold:fanout"][1] == 0
    assert os.path.getsize(clock) == 16


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"hold_streams": 2}, "hold_streams"),  # not the hold family
        ({"family": "hold", "hold_trigger": "broadcast"}, "hold_trigger"),  # a trigger without listeners
        ({"family": "hold", "hold_streams": 1, "hold_trigger": ""}, "hold_trigger"),
        ({"family": "hold", "hold_streams": 1, "hold_trigger_every_s": 0.0}, "hold_trigger_every_s"),
        ({"family": "hold", "hold_streams": 1, "hold_trigger_every_s": float("nan")}, "hold_trigger_every_s"),
        ({"family": "hold", "hold_clock": "/tmp/x.clock"}, "hold_clock"),
        ({"family": "hold", "hold_streams": -1}, "hold_streams"),
        ({"family": "hold", "hold_streams": 1, "protocol_version": "2026-07-28"}, "family"),
    ],
)
def test_bad_hold_values_name_their_field(kw: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=f"^engine config: {field}: "):
        core.EngineConfig(url="http://127.0.0.1:1/mcp", **kw)


def test_an_unwritable_clock_is_refused_when_the_engine_is_made(tmp_path: Path) -> None:
    cfg = core.EngineConfig(family="hold", url="http://127.0.0.1:1/mcp", hold_streams=1, hold_clock=str(tmp_path / "no" / "such" / "dir"))
    with pytest.raises(ValueError, match=r"^engine config: hold_clock: "):
        core.native_engine(cfg)


def test_config_reads_back_the_hold_fields() -> None:
    cfg = core.EngineConfig(family="hold", url="http://127.0.0.1:1/mcp", hold_streams=7, hold_trigger="broadcast", hold_trigger_every_s=2.5)
    assert (cfg.hold_streams, cfg.hold_trigger, cfg.hold_trigger_every_s, cfg.hold_clock) == (7, "broadcast", 2.5, None)
    d = core.EngineConfig(url="http://127.0.0.1:1/mcp")
    assert (d.hold_streams, d.hold_trigger, d.hold_trigger_every_s, d.hold_clock) == (0, None, 5.0, None)
