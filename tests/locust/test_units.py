"""One way to write a latency for people, wherever the swarm shows one."""

from __future__ import annotations

import pytest

from mcpfast.locust.units import latency_text


@pytest.mark.parametrize(
    ("us", "text"),
    [
        (0, "0 µs"),
        (1, "1 µs"),
        (80, "80 µs"),
        (999, "999 µs"),
        (999.6, "1 ms"),
        (1000, "1 ms"),
        (2500, "2.5 ms"),
        (63_260, "63.3 ms"),
        (200_000, "200 ms"),
        (999_700, "1 s"),
        (1_000_000, "1 s"),
        (5e6, "5 s"),
        (125e6, "125 s"),
    ],
)
def test_latency_text(us: float, text: str) -> None:
    assert latency_text(us) == text
    assert "e+" not in latency_text(us) and "e-" not in latency_text(us)
