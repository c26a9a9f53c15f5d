"""Command-line value checks shared by every parser (``mcpfast bench`` and the swarm's Locust
options): each turns a string into a value or raises ``argparse.ArgumentTypeError`` with the
reason, so a bad flag is refused before any run starts."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

__all__ = ["finite_positive", "int_at_least", "listen_address", "positive_share", "rate", "share"]


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def int_at_least(minimum: int) -> Callable[[str], int]:
    """An integer flag that must be at least ``minimum``."""

    def check(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    return check


def finite_positive(text: str) -> float:
    """A finite number above zero (a duration, say)."""
    value = _number(text)
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return value


def rate(text: str) -> float:
    """A finite number of at least zero (0 means: no target rate)."""
    value = _number(text)
    if not (value >= 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}")
    return value


def share(text: str) -> float:
    """A fraction within 0..1."""
    value = _number(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be within 0..1, got {text!r}")
    return value


def positive_share(text: str) -> float:
    """A fraction above 0, at most 1 (a share of something that must not vanish)."""
    value = _number(text)
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be within (0, 1] (above 0, at most 1), got {text!r}")
    return value


def listen_address(text: str) -> tuple[str, int]:
    """``PORT``, ``HOST:PORT`` or ``[IPv6]:PORT`` -> (host, port); no host: every interface (as
    Locust's ``--web-host``)."""
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host, port_text = "", text
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        port = int(port_text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not [HOST:]PORT: {text!r}") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 1..65535, got {port}")
    return host, port
