"""Protocol revisions mcpfast speaks, and the rules for agreeing on one.

Two eras exist. Up to and including 2025-11-25 a connection starts with an ``initialize``
handshake that fixes one version for its lifetime ("handshake era"). From 2026-07-28 every
request names its own version in ``params._meta`` ("stateless era").
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "BATCH_VERSIONS",
    "HANDSHAKE_VERSIONS",
    "LATEST",
    "LATEST_HANDSHAKE",
    "STATELESS_VERSIONS",
    "SUPPORTED_VERSIONS",
    "is_handshake_era",
    "is_stateless",
    "negotiate",
    "supports",
]

V2024_11_05: Final = "2024-11-05"
V2025_03_26: Final = "2025-03-26"
V2025_06_18: Final = "2025-06-18"
V2025_11_25: Final = "2025-11-25"
V2026_07_28: Final = "2026-07-28"

HANDSHAKE_VERSIONS: Final[tuple[str, ...]] = (V2024_11_05, V2025_03_26, V2025_06_18, V2025_11_25)
"""Revisions negotiated with ``initialize``, oldest first."""
STATELESS_VERSIONS: Final[tuple[str, ...]] = (V2026_07_28,)
"""Revisions carried per request in ``_meta``, oldest first."""
SUPPORTED_VERSIONS: Final[tuple[str, ...]] = HANDSHAKE_VERSIONS + STATELESS_VERSIONS
LATEST: Final = V2026_07_28
LATEST_HANDSHAKE: Final = V2025_11_25
BATCH_VERSIONS: Final[frozenset[str]] = frozenset({V2025_03_26})
"""Only 2025-03-26 allows JSON-RPC batches (added there, removed in 2025-06-18)."""

_HANDSHAKE = frozenset(HANDSHAKE_VERSIONS)
_STATELESS = frozenset(STATELESS_VERSIONS)


def is_handshake_era(version: str) -> bool:
    """Whether ``version`` is a known revision negotiated with ``initialize``."""
    return version in _HANDSHAKE


def is_stateless(version: str) -> bool:
    """Whether ``version`` is a known revision carried per request (2026-07-28 on)."""
    return version in _STATELESS


def supports(version: str, feature_since: str) -> bool:
    """Whether ``version`` is at least ``feature_since`` (both known revisions; dates sort)."""
    return version >= feature_since


def negotiate(requested: object, offered: tuple[str, ...] = HANDSHAKE_VERSIONS) -> str:
    """The version an ``initialize`` result answers with.

    The spec's rule: echo the client's version when the server supports it, else counter-offer
    the server's newest handshake-era version (not an error; the client decides whether to
    disconnect). A stateless version asked for through ``initialize`` is outside ``offered`` and
    so gets the counter-offer too.

    Args:
        requested: ``params.protocolVersion`` as sent (anything; a non-string gets the
            counter-offer).
        offered: the handshake-era versions this server accepts, oldest first.
    """
    if isinstance(requested, str) and requested in offered:
        return requested
    return offered[-1]
