"""How the swarm writes a latency for people: one function for every table, sentence, page and
axis (pure, no Locust import)."""

from __future__ import annotations

import math

__all__ = ["latency_text"]


def _significant(value: float, digits: int = 3) -> tuple[float, int]:
    """``value`` rounded to ``digits`` significant digits, and the decimals that shows."""
    decimals = max(digits - 1 - math.floor(math.log10(value)), 0) if value > 0 else 0
    return round(value, decimals), decimals


def _trimmed(value: float, decimals: int) -> str:
    text = f"{value:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def latency_text(us: float) -> str:
    """A latency in µs as people read it: ``63 µs``, ``4.12 ms``, ``1.5 s`` (three significant
    digits above 1 ms, trailing zeros dropped); never scientific notation, and a value that
    rounds up to the next unit is written in it (999.7 ms is ``1 s``)."""
    if round(us) < 1000:
        return f"{max(us, 0):.0f} µs"
    ms, decimals = _significant(us / 1000.0)
    if ms < 1000:
        return f"{_trimmed(ms, decimals)} ms"
    s, decimals = _significant(us / 1_000_000.0)
    return f"{_trimmed(s, decimals)} s"
