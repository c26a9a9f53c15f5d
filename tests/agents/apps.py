"""Servers for the agents' tests (``mcpfast serve --app apps:items``, this folder on
``PYTHONPATH``): ``items`` keeps items an agent creates, reads and deletes by the id ``create``
returned (as ``structuredContent``), so a step that sends another id, or none, fails; ``picky``
has a tool whose arguments nothing in its schema tells (a default agent leaves it out)."""

from __future__ import annotations

import itertools
from typing import Any

from mcpfast.server.app import Server

items = Server("items")
_store: dict[str, str] = {}
_ids = itertools.count(1)


@items.tool()
def create(title: str) -> dict[str, Any]:
    """Create an item; its id is in the result's structuredContent."""
    item = f"item-{next(_ids)}"
    _store[item] = title
    return {"id": item, "title": title}


@items.tool()
def get(id: str) -> dict[str, Any]:
    """The item with this id (an error for an id never created, or deleted)."""
    if id not in _store:
        raise KeyError(f"no item {id!r}")
    return {"id": id, "title": _store[id]}


@items.tool()
def delete(id: str) -> dict[str, Any]:
    """Delete the item with this id (an error for an unknown one)."""
    if _store.pop(id, None) is None:
        raise KeyError(f"no item {id!r}")
    return {"deleted": id}


picky = Server("picky")


@picky.tool()
def echo(text: str) -> str:
    """Return the text."""
    return text


@picky.tool()
def lookup(code: str) -> str:
    """An order by its code (nothing here says what a code looks like)."""
    if code != "A-17":
        raise KeyError(f"no order {code!r}")
    return "order A-17"
