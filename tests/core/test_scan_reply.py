"""scan_reply(): the client fast path, against both implementations."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from mcpfast.core import JsonRpcError


def scan_error(core: ModuleType, data: Any, **kw: Any) -> JsonRpcError:
    with pytest.raises(JsonRpcError) as info:
        core.scan_reply(data, **kw)
    return info.value


@pytest.mark.parametrize(
    "data, expected",
    [
        (b'{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}', (1, False, None)),
        (b'{"jsonrpc":"2.0","id":"abc","result":null}', ("abc", False, None)),
        (b'{"result":[1,2,{"x":"y"}],"id":0,"jsonrpc":"2.0"}', (0, False, None)),
        (b' \n{"jsonrpc":"2.0","id":-3,"result":1}\r\n', (-3, False, None)),
        (b'{"jsonrpc":"2.0","id":5,"error":{"code":-32601,"message":"nope"}}', (5, True, -32601)),
        (b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x","data":1}}', (None, True, -32700)),
        (b'{"jsonrpc":"2.0","id":%d,"result":1}' % 2**70, (2**70, False, None)),
        (b'{"jsonrpc":"2.0","id":%d,"error":{"code":%d,"message":""}}' % (-(2**65), 2**63), (-(2**65), True, 2**63)),
        (rb'{"jsonrpc":"2.0","\u0069d":"\u00e9","result":1}', ("é", False, None)),
        (b'{"jsonrpc":"2.0","id":1,"result":1,"id":2}', (2, False, None)),
    ],
)
def test_replies(core: ModuleType, data: bytes, expected: tuple[Any, bool, Any]) -> None:
    got = core.scan_reply(data)
    assert got == expected
    assert type(got[0]) is type(expected[0])
    assert core.scan_reply(data.decode()) == expected
    assert core.scan_reply(bytearray(data)) == expected
    assert core.scan_reply(memoryview(data)) == expected


@pytest.mark.parametrize(
    "data, expected_id",
    [
        (b'{"jsonrpc":"2.0","id":1,"method":"m"}', 1),
        (b'{"jsonrpc":"2.0","id":"r","method":"m","params":{}}', "r"),
        (b'{"jsonrpc":"2.0","method":"m"}', None),
        (b'[{"jsonrpc":"2.0","id":1,"result":1}]', None),
        (b"[]", None),
        (b"1", None),
        (b'"x"', None),
        (b'{"jsonrpc":"2.0","id":1}', 1),
        (b'{"jsonrpc":"2.0","result":1}', None),
        (b'{"jsonrpc":"1.0","id":4,"result":1}', 4),
        (b'{"jsonrpc":"2.0","id":4,"result":1,"error":{"code":1,"message":""}}', 4),
        (b'{"jsonrpc":"2.0","id":4,"error":{"code":"x","message":""}}', 4),
        (b'{"jsonrpc":"2.0","id":4,"error":{"code":true,"message":""}}', 4),
        (b'{"jsonrpc":"2.0","id":null,"result":1}', None),
        (b'{"jsonrpc":"2.0","id":true,"result":1}', None),
        (b'{"jsonrpc":"2.0","id":1.5,"result":1}', None),
        (b'{"jsonrpc":"2.0","id":%d,"method":"m"}' % 2**70, 2**70),
    ],
)
def test_not_a_reply(core: ModuleType, data: bytes, expected_id: Any) -> None:
    err = scan_error(core, data)
    assert (err.code, err.id) == (-32600, expected_id)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"{",
        b'{"jsonrpc":"2.0","id":1,"result":[1,]}',
        b'{"jsonrpc":"2.0","id":1,"result":"\xff"}',
        b'{"jsonrpc":"2.0","id":1,"result":1e999}',
        b'{"jsonrpc":"2.0","id":1,"result":{"a":"\\ud800"}}',
        b'{"jsonrpc":"2.0","id":1,"result":1} {}',
        b"\xef\xbb\xbf{}",
    ],
)
def test_invalid_json(core: ModuleType, data: bytes) -> None:
    err = scan_error(core, data)
    assert (err.code, err.id) == (-32700, None)


def test_depth(core: ModuleType) -> None:
    ok = b'{"jsonrpc":"2.0","id":1,"result":' + b"[" * 127 + b"]" * 127 + b"}"
    assert core.scan_reply(ok) == (1, False, None)
    bad = b'{"jsonrpc":"2.0","id":1,"result":' + b"[" * 128 + b"]" * 128 + b"}"
    err = scan_error(core, bad)
    assert (err.code, err.id) == (-32700, None)
    assert core.scan_reply(bad, max_depth=129) == (1, False, None)
    assert scan_error(core, ok, max_depth=3).code == -32700
    with pytest.raises(ValueError):
        core.scan_reply(ok, max_depth=0)
