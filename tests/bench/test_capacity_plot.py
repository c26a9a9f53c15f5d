"""``mcpfast capacity``'s curve, its page and its command line, on a synthetic ``capacity.json``
(fast; nothing is spawned: the searches against real servers are in tests/capacity)."""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from mcpfast.bench import capacity
from mcpfast.cli import main as mcpfast_main
from mcpfast.results import plots

PNG = b"\x89PNG\r\n\x1a\n"


def _step(n: int, offered: float, achieved: float, p50: int, verdict: str, reasons: list[str] | None = None) -> dict[str, Any]:
    latency = {"p50": p50, "p90": p50 * 2, "p99": p50 * 4, "p99.9": p50 * 6}
    return {"step": n, "offered": offered, "achieved": achieved, "latency_us": latency, "verdict": verdict, "reasons": reasons or []}


def result(**over: Any) -> dict[str, Any]:
    """A search that found 300 calls/s below a 2 ms p99 bound: sub-millisecond latencies below it."""
    steps = [
        _step(1, 100, 100, 80, "pass"),
        _step(2, 200, 200, 95, "pass"),
        _step(3, 400, 380, 900, "fail", ["tools/call:echo p99 read 3.6 ms (SLO < 2 ms, 1.8x)"]),
        _step(4, 300, 300, 120, "pass"),
        _step(5, 350, 349, 400, "fail", ["tools/call:echo p99 read 2.4 ms (SLO < 2 ms, 1.2x)"]),
    ]
    data = {
        "format": "mcpfast-capacity",
        "status": "found",
        "capacity": 300.0,
        "last_good": 300.0,
        "first_bad": 350.0,
        "sentence": "capacity 300 calls/s at tools/call:echo p99 < 2ms; at 350/s tools/call:echo p99 read 2.4 ms",
        "unit": "calls/s",
        "slo": ["tools/call:echo p99 < 2ms"],
        "steps": steps,
    }
    return {**data, **over}


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """What each figure showed when it was saved: its axes' tick labels, lines and title."""
    seen: list[dict[str, Any]] = []
    save = plots.save

    def spy(fig: Any, path: Path, title: str | None = None) -> Path:
        fig.canvas.draw()  # tick labels are made at draw time
        ax = fig.axes[0]
        seen.append(
            {
                "y": [t.get_text() for t in ax.get_yticklabels() if t.get_text()],
                "x": [t.get_text() for t in ax.get_xticklabels() if t.get_text()],
                "hlines": sorted(line.get_ydata()[0] for line in ax.get_lines() if len(set(line.get_ydata())) == 1),
                "legend": [t.get_text() for t in ax.get_legend().get_texts()] if ax.get_legend() else [],
                "title": title,
            }
        )
        return save(fig, path, title)

    monkeypatch.setattr(plots, "save", spy)
    return seen


def test_the_curve_is_drawn_from_capacity_json_with_microseconds_below_a_millisecond(tmp_path: Path, drawn: list[dict[str, Any]]) -> None:
    png = plots.capacity_plot(result(), tmp_path / "capacity.png")
    assert png.read_bytes()[:8] == PNG
    (fig,) = drawn
    assert fig["title"] == "capacity 300 calls/s at tools/call:echo p99 < 2ms"
    assert any(label.endswith(" µs") for label in fig["y"]), fig["y"]  # 80 µs .. 900 µs steps
    assert any(label.endswith(" ms") for label in fig["y"]), fig["y"]  # the 2 ms bound and p99.9 above it
    for label in fig["y"] + fig["x"]:  # never scientific notation, never an offset
        assert "e" not in label.replace("µs", "").replace("ms", "") and "10^" not in label and "×" not in label, label
    assert 2000.0 in fig["hlines"]  # the SLO's bound, in µs on the axis
    assert "capacity 300 calls/s" in fig["legend"] and "SLO tools/call:echo p99 < 2ms" in fig["legend"]
    assert {"passed", "failed"} <= set(fig["legend"])


def test_a_bracket_and_at_least_are_drawn_as_bounds(tmp_path: Path, drawn: list[dict[str, Any]]) -> None:
    plots.capacity_plot(result(status="bracket", capacity=None), tmp_path / "a.png")
    plots.capacity_plot(result(status="at_least", capacity=None, first_bad=None), tmp_path / "b.png")
    bracket, at_least = drawn
    assert "last good 300 - first bad 350 (offered)" in bracket["legend"] and not any("capacity" in t for t in bracket["legend"])
    assert "held 300 (at least)" in at_least["legend"]


def test_a_search_without_a_completed_request_says_so(tmp_path: Path) -> None:
    png = plots.capacity_plot(result(steps=[_step(1, 1000, 0, 0, "fail")], status="below", capacity=None), tmp_path / "c.png")
    assert png.read_bytes()[:8] == PNG


def test_mcpfast_report_redraws_a_capacity_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "capacity.json").write_text(json.dumps(result()), encoding="utf-8")
    assert mcpfast_main(["report", str(tmp_path)]) == 0
    assert (tmp_path / "capacity.png").read_bytes()[:8] == PNG
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert page.index("capacity 300 calls/s at tools/call:echo p99 &lt; 2ms") < page.index("<svg")  # the verdict first
    assert "No capacity_histograms.json in this folder" in page  # a search without the swarm's histograms
    assert f"written: {tmp_path / 'report.html'}" in capsys.readouterr().out


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    capacity.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["capacity", *argv])


def test_the_locust_command_carries_the_family_the_shape_and_every_option_given(tmp_path: Path) -> None:
    args = _args("--slo", "tools/call:locked p99 < 500ms", "--slo", "fail% < 1", "--tool", "locked", "--start", "100",
                 "--steady", "3", "--stop-on-failure", "--processes", "2", "--engine", "python", "--locust-arg=--stop-timeout=3")  # fmt: skip
    argv = capacity.locust_argv(args, tmp_path, "http://127.0.0.1:9/mcp", 1234)
    assert argv[argv.index("-f") + 1].endswith("loadtests/tools_call.py," + str(capacity.SHAPE))
    pairs = dict(itertools.pairwise(argv))  # each option and the word after it
    assert pairs["--host"] == "http://127.0.0.1:9/mcp" and pairs["--mcp-server-pid"] == "1234"
    assert pairs["--mcp-capacity-start"] == "100" and pairs["--mcp-capacity-steady"] == "3" and pairs["--processes"] == "2"
    assert pairs["--mcp-engine"] == "python" and pairs["--mcp-tool"] == "locked" and pairs["--mcp-capacity-out"] == str(tmp_path)
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--mcp-slo"] == ["tools/call:locked p99 < 500ms", "fail% < 1"]
    assert "--mcp-capacity-stop-on-failure" in argv and argv[-1] == "--stop-timeout=3"
    assert pairs["--mcp-histogram-out"] == str(tmp_path / "capacity") and "--mcp-no-report" in argv  # one page: report.html
    assert pairs["--master-bind-port"] == pairs["--master-port"] != "5557"  # a free port: Locust's default may be another run's
    assert "--mcp-capacity-warmup" not in argv  # not given: the shape's default


def test_stdio_passes_the_command_and_a_scenario_its_file(tmp_path: Path) -> None:
    scenario = tmp_path / "mix.toml"
    args = _args("--slo", "p99 < 1s", "--target-command", "mcpfast serve", "--mcp-scenario", str(scenario))
    argv = capacity.locust_argv(args, tmp_path, None, 0)
    assert argv[argv.index("-f") + 1].startswith(str(capacity.LOCUSTFILES / "scenario.py"))
    assert argv[argv.index("--mcp-command") + 1] == "mcpfast serve" and "--host" not in argv and "--mcp-server-pid" not in argv
    assert argv[argv.index("--mcp-scenario") + 1] == str(scenario)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--slo", "tools/call:echo p99 <"], "--slo"),
        (["--slo", "p99 < 5ms", "--start", "0"], "--start"),
        (["--slo", "p99 < 5ms", "--start", "-5"], "--start"),
        (["--slo", "p99 < 5ms", "--target", "http://127.0.0.1:9/mcp", "--target-command", "x"], "not allowed with"),
        (["--slo", "p99 < 5ms", "--family", "tools_call", "--mcp-scenario", "x.toml"], "not allowed with"),
        ([], "--slo"),
    ],
)
def test_bad_command_lines_exit_2_naming_the_problem(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        mcpfast_main(["capacity", *argv])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--resolution", "1.5"], "the resolution must be in (0, 1)"),
        (["--start", "500", "--max-rate", "100"], "maximum rate 100/s is below the start rate 500/s"),
        (["--steady", "0.5"], "the steady window must be at least 1 s"),
    ],
)
def test_bad_search_bounds_exit_2_before_anything_starts(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert mcpfast_main(["capacity", "--slo", "p99 < 5ms", "--out", str(out), *argv]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()
