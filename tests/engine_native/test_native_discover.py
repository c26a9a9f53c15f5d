"""The native engine's ``discover`` family against ``mcpfast serve --metrics``: each user alternates a
2026-07-28 start and a handshake-era one, and the engine's counts are the server's own, method by
method; bad values are refused naming the field."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from _native_runs import run_engines, scrape
from _support import metric, start_reference_server, stop

from mcpfast import core

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(not core.HAS_NATIVE_ENGINE, reason="the native engine needs the compiled core"),
]


@pytest.fixture
def served() -> Iterator[str]:
    proc, url = start_reference_server("--metrics")
    yield url
    stop(proc)


def test_discover_starts_counted_as_the_server_counts(served: str) -> None:
    eng = core.native_engine(core.EngineConfig(family="discover", url=served, arguments={"text": "x"}))
    (totals,) = run_engines([eng], [2], 2.0)
    assert all(f == 0 for _, f in totals.values()), totals
    ok = {name: n for name, (n, _) in totals.items()}
    text = scrape(served)

    def count(method: str, status: str = "200") -> int:
        return int(metric(text, "mcpfast_http_requests_total", method=method, status=status))

    d, i = ok["start:discover"], ok["start:initialize"]
    assert d > 0 and i > 0 and abs(d - i) <= 2  # each user alternates the two starts
    assert ok["server/discover"] == ok["tools/call:echo (first after discover)"] == d == count("server/discover")
    assert ok["initialize"] == ok["notifications/initialized"] == ok["tools/call:echo (first after initialize)"] == i
    assert ok["initialize"] == count("initialize") and ok["notifications/initialized"] == count("notifications/initialized", "202")
    assert d + i == count("tools/call")
    assert ok["DELETE"] == count("DELETE") == i


@pytest.mark.parametrize(
    "kw",
    [
        {"protocol_version": "2026-07-28", "url": "http://127.0.0.1:1/mcp"},  # discover compares it with a handshake era
        {"transport": "stdio", "command": ["true"]},
    ],
)
def test_bad_discover_values_name_the_field(kw: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"^engine config: family: discover runs over HTTP"):
        core.EngineConfig(family="discover", **kw)
