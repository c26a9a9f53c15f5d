"""benchmarks.core_report turns a pytest-benchmark JSON into results.md and core.png."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import core_report


def bench(group: str, impl: str, median: float) -> dict[str, object]:
    return {"group": group, "name": f"test_x[{impl}]", "extra_info": {"impl": impl}, "stats": {"median": median}}


def test_report(tmp_path: Path) -> None:
    src = tmp_path / "bench.json"
    src.write_text(
        json.dumps(
            {
                "benchmarks": [
                    bench("decode initialize", "python", 2e-6),
                    bench("decode initialize", "rust", 4e-7),
                    bench("scan_reply", "python", 3e-6),
                    bench("scan_reply", "rust", 1e-6),
                    bench("only python", "python", 1e-3),
                ]
            }
        )
    )
    assert core_report.main([str(src), str(tmp_path / "out"), "--command", "make bench-core"]) == 0
    md = (tmp_path / "out" / "results.md").read_text()
    assert "Reproduce with `make bench-core`." in md
    assert "| decode initialize | 2 µs | 400 ns | 5.00x |" in md
    assert "| scan_reply | 3 µs | 1 µs | 3.00x |" in md
    assert "| only python | 1 ms | n/a | n/a |" in md
    png = (tmp_path / "out" / "core.png").read_bytes()
    assert png.startswith(b"\x89PNG")


def test_report_without_benchmarks(tmp_path: Path) -> None:
    src = tmp_path / "empty.json"
    src.write_text(json.dumps({"benchmarks": []}))
    assert core_report.main([str(src), str(tmp_path / "out")]) == 1
