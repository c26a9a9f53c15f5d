"""Pagination, completion cap, log levels, tool-error mode."""

from __future__ import annotations

import pytest

from mcpfast.protocol import McpError
from mcpfast.sansio import rules


def test_pagination_walks_every_item_once() -> None:
    items = list(range(7))
    seen, cursor, pages = [], None, 0
    while True:
        page, cursor = rules.paginate(items, cursor, 3)
        seen.extend(page)
        pages += 1
        if cursor is None:
            break
    assert seen == items and pages == 3


def test_pagination_empty_and_exact() -> None:
    assert rules.paginate([], None, 3) == ([], None)
    assert rules.paginate([1, 2, 3], None, 3) == ([1, 2, 3], None)


@pytest.mark.parametrize("cursor", ["", "nope", "!!!", 5, rules.encode_cursor(99), "bWNwZmFzdDp4"])
def test_invalid_cursor(cursor: object) -> None:
    with pytest.raises(McpError) as info:
        rules.paginate([1, 2, 3, 4], cursor, 2)
    assert info.value.code == -32602


def test_completion_is_capped_at_100() -> None:
    result = rules.completion_result([str(i) for i in range(150)])
    assert len(result["completion"]["values"]) == 100
    assert result["completion"]["hasMore"] is True and result["completion"]["total"] == 150
    assert rules.completion_result(["a"]) == {"completion": {"values": ["a"]}}


def test_log_levels() -> None:
    assert rules.log_level_rank("debug") < rules.log_level_rank("emergency")
    with pytest.raises(McpError):
        rules.log_level_rank("verbose")


def test_tool_input_error_mode() -> None:
    assert not rules.input_errors_are_tool_errors("2025-06-18")
    assert rules.input_errors_are_tool_errors("2025-11-25")
