"""A server whose ``echo`` takes 2 ms longer than the reference server's: the regression
``mcpfast compare`` must find beyond noise (tests/results/test_compare.py)."""

from __future__ import annotations

import asyncio

import mcpfast

slow = mcpfast.Server("slow-echo")
DELAY_S = 0.002


@slow.tool()
async def echo(text: str = "") -> str:
    """Return the text, 2 ms later."""
    await asyncio.sleep(DELAY_S)
    return text
