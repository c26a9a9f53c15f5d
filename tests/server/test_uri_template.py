"""RFC 6570 template matching for resource templates."""

from __future__ import annotations

import pytest

from mcpfast.server.uri_template import UriTemplate, is_template


def test_simple_and_reserved() -> None:
    t = UriTemplate("test://template/{id}/data")
    assert t.variables == ["id"]
    assert t.match("test://template/123/data") == {"id": "123"}
    assert t.match("test://template/1/2/data") is None
    assert t.match("test://template//data") is None
    assert UriTemplate("f://{+path}").match("f://a/b%20c") == {"path": "a/b c"}


def test_query_expression() -> None:
    t = UriTemplate("s://search{?q,limit}")
    assert t.match("s://search?q=x&limit=3&other=1") == {"q": "x", "limit": "3"}
    assert t.match("s://search") == {}


def test_unsupported() -> None:
    assert is_template("a://{x}") and not is_template("a://x")
    for bad in ("a://{/x}", "a://{x,y}", "a://{?q}/after", "a://{bad name}"):
        with pytest.raises(ValueError):
            UriTemplate(bad)
