"""Transports: thin adapters moving bytes between a peer and the session machine."""

from __future__ import annotations

__all__: list[str] = []
