"""The garbage collector of a process that does nothing but serve (``mcpfast serve``, native runner).

CPython's collector starts a full collection whenever the objects moved to its oldest generation
since the last full one reach a quarter of those it holds, and a full collection walks every one
of them, with the event loop stopped. A server holding 12,000 sessions holds some 300,000 such
objects; as sessions come and go the quarter is reached every few seconds, and each walk stops
every answer for 100 ms or more while finding nothing: a session's objects are freed by their
reference counts when it ends (requests and sessions leave no cycles behind). Its young
collections grow long too (20-90 ms there): one is due by allocations minus deallocations, and
sessions ending free about as many objects as new ones make, so tens of thousands of young
objects pile up between them.

``Collector`` keeps long-lived objects out of the collector's walks instead. Every ``period``
seconds it collects the young generations (what recent requests left, cycles included), then
moves every object still alive to the permanent generation (``gc.freeze``): every collection
after it, automatic or not, walks only what was made since, and a young collection never holds
more than ``period`` seconds of new objects. The permanent generation is never walked, so a cycle
that becomes garbage after it was frozen stays until the next full collection, which the
collector runs itself (everything unfrozen first) when the heap has grown ``growth`` times since
the last one: garbage cycles hold at most about as much as the server holds alive, and a server
whose sessions are freed by their reference counts, as these are, never pays for a full walk
once its sessions stop growing. The heap is the interpreter's small blocks
(``sys.getallocatedblocks``: every object of a cycle is one), read every ``count_period``
seconds; counting the frozen objects instead walks their list, 50 ms at 12,000 sessions.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import time
from typing import Final

__all__ = ["COUNT_PERIOD", "GROWTH", "HEAP_FLOOR", "YOUNG_PERIOD", "Collector"]

YOUNG_PERIOD: Final = 0.25
"""Seconds between young collections: each walks at most this long's new objects (a few
milliseconds at thousands of new sessions a second)."""
GROWTH: Final = 2.0
"""A full collection once the heap is this many times what it was after the last one."""
COUNT_PERIOD: Final = 1.0
"""Seconds between reads of the heap's size (a read visits every pool header: under a millisecond)."""
HEAP_FLOOR: Final = 500_000
"""Heap blocks below which no full collection is run (a small process's growth is cheap to carry)."""


class Collector:
    """Collects the young generations on a timer and freezes what survives (see the module doc).

    Args:
        period: seconds between young collections.
        growth: a full collection once the heap grew this many times since the last.
        count_period: seconds between reads of the heap's size.

    Attributes:
        full_collections: the full collections it ran (the one at ``start`` included).
    """

    __slots__ = ("_counted", "_handle", "_limit", "_loop", "count_period", "full_collections", "growth", "period")

    def __init__(self, period: float = YOUNG_PERIOD, *, growth: float = GROWTH, count_period: float = COUNT_PERIOD) -> None:
        self.period = period
        self.growth = growth
        self.count_period = count_period
        self.full_collections = 0
        self._limit = 0
        self._counted = 0.0
        self._handle: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        """A full collection, everything alive frozen, then young collections every ``period`` on the running loop."""
        loop = self._loop = asyncio.get_running_loop()
        self.collect_all()
        self._handle = loop.call_later(self.period, self._tick)

    def stop(self) -> None:
        """No more collections of its own; every frozen object back in the oldest generation."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        gc.unfreeze()

    def collect_all(self) -> None:
        """A full collection of everything (the frozen objects too), then everything alive frozen."""
        gc.unfreeze()
        gc.collect()
        gc.freeze()
        self.full_collections += 1
        self._counted = time.monotonic()
        self._limit = int(max(sys.getallocatedblocks(), HEAP_FLOOR) * self.growth)

    def collect_young(self) -> None:
        """Collect the young generations and freeze what survived; a full collection instead when due."""
        gc.collect(1)
        gc.freeze()
        now = time.monotonic()
        if now - self._counted >= self.count_period:
            self._counted = now
            if sys.getallocatedblocks() > self._limit:
                self.collect_all()

    def _tick(self) -> None:
        self._handle = None
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        self.collect_young()
        self._handle = loop.call_later(self.period, self._tick)
