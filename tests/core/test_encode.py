"""Encoders: the exact bytes produced, and the TypeErrors, against both implementations."""

from __future__ import annotations

import collections
import dataclasses
import datetime
import decimal
import enum
import uuid
from types import ModuleType
from typing import Any

import orjson
import pytest


class Color(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


class MyStr(str):
    pass


class MyInt(int):
    pass


class MyFloat(float):
    pass


class MyDict(dict):  # type: ignore[type-arg]
    pass


class MyList(list):  # type: ignore[type-arg]
    pass


class MyTuple(tuple):  # type: ignore[type-arg]
    pass


Point = collections.namedtuple("Point", "x y")


@dataclasses.dataclass
class DC:
    a: int = 1


def nest(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


# --------------------------------------------------------------------------------- envelopes


def test_encode_request(core: ModuleType) -> None:
    out = core.encode_request(1, "tools/call", {"name": "echo", "arguments": {"text": "hi"}})
    assert out == b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}'


def test_encode_request_without_params(core: ModuleType) -> None:
    assert core.encode_request("a", "ping") == b'{"jsonrpc":"2.0","id":"a","method":"ping"}'
    assert core.encode_request("a", "ping", None) == b'{"jsonrpc":"2.0","id":"a","method":"ping"}'


def test_encode_request_empty_params_kept(core: ModuleType) -> None:
    assert core.encode_request(2, "m", {}) == b'{"jsonrpc":"2.0","id":2,"method":"m","params":{}}'
    assert core.encode_request(2, "m", []) == b'{"jsonrpc":"2.0","id":2,"method":"m","params":[]}'


def test_encode_request_bytes_params_spliced(core: ModuleType) -> None:
    out = core.encode_request(3, "m", b'{ "a" : [1, 2] }')
    assert out == b'{"jsonrpc":"2.0","id":3,"method":"m","params":{ "a" : [1, 2] }}'


def test_encode_notification(core: ModuleType) -> None:
    assert core.encode_notification("notifications/initialized") == (b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    out = core.encode_notification("notifications/progress", {"progressToken": 7, "progress": 0.5, "total": 1})
    assert out == (b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":7,"progress":0.5,"total":1}}')
    assert core.encode_notification("n", b"[1]") == b'{"jsonrpc":"2.0","method":"n","params":[1]}'


def test_encode_result(core: ModuleType) -> None:
    out = core.encode_result(1, {"content": [{"type": "text", "text": "ok"}], "isError": False})
    assert out == b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}],"isError":false}}'


@pytest.mark.parametrize(
    "value, expected",
    [
        (None, b"null"),
        (True, b"true"),
        (False, b"false"),
        (0, b"0"),
        (-5, b"-5"),
        ("s", b'"s"'),
        ([], b"[]"),
        ({}, b"{}"),
        ((1, "a"), b'[1,"a"]'),
        ({"a": {"b": [None, 1.5]}}, b'{"a":{"b":[null,1.5]}}'),
    ],
)
def test_encode_result_values(core: ModuleType, value: Any, expected: bytes) -> None:
    assert core.encode_result(9, value) == b'{"jsonrpc":"2.0","id":9,"result":' + expected + b"}"


def test_encode_result_bytes_spliced(core: ModuleType) -> None:
    body = b'{"tools":[ {"name":"x"} ]}'
    assert core.encode_result("r", body) == b'{"jsonrpc":"2.0","id":"r","result":' + body + b"}"


def test_encode_result_bytes_crlf_become_spaces(core: ModuleType) -> None:
    body = b'{\r\n  "a": 1,\n  "b": [\r2]\n}'
    out = core.encode_result(1, body)
    assert out == b'{"jsonrpc":"2.0","id":1,"result":{    "a": 1,   "b": [ 2] }}'
    assert b"\n" not in out and b"\r" not in out
    assert orjson.loads(out)["result"] == {"a": 1, "b": [2]}


def test_encode_error(core: ModuleType) -> None:
    assert core.encode_error(1, -32601, "Method not found") == (
        b'{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found"}}'
    )
    assert core.encode_error(None, -32700, "Parse error") == (
        b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}'
    )
    assert core.encode_error("x", 5, "m", {"detail": [1]}) == (
        b'{"jsonrpc":"2.0","id":"x","error":{"code":5,"message":"m","data":{"detail":[1]}}}'
    )
    assert core.encode_error("x", 5, "m", None) == b'{"jsonrpc":"2.0","id":"x","error":{"code":5,"message":"m"}}'
    assert core.encode_error(1, 0, "", False) == b'{"jsonrpc":"2.0","id":1,"error":{"code":0,"message":"","data":false}}'


@pytest.mark.parametrize("code", ["1", 1.0, None, True])
def test_encode_error_code_must_be_int(core: ModuleType, code: Any) -> None:
    with pytest.raises(TypeError):
        core.encode_error(1, code, "m")


def test_encode_error_message_must_be_str(core: ModuleType) -> None:
    with pytest.raises(TypeError):
        core.encode_error(1, 1, None)


# ---------------------------------------------------------------------------------------- ids


@pytest.mark.parametrize(
    "id_, expected",
    [
        (0, b"0"),
        (-1, b"-1"),
        (2**63 - 1, b"9223372036854775807"),
        (2**64, b"18446744073709551616"),
        (2**70, str(2**70).encode()),
        (-(2**70), str(-(2**70)).encode()),
        (10**100, str(10**100).encode()),
        ("", b'""'),
        ('a"b\\c\n', b'"a\\"b\\\\c\\n"'),
        ("é😀", '"é😀"'.encode()),
        (MyInt(4), b"4"),
        (Level.HIGH, b"3"),
        (MyStr("s"), b'"s"'),
    ],
)
def test_ids(core: ModuleType, id_: Any, expected: bytes) -> None:
    assert core.encode_result(id_, 1) == b'{"jsonrpc":"2.0","id":' + expected + b',"result":1}'
    assert core.encode_request(id_, "m") == b'{"jsonrpc":"2.0","id":' + expected + b',"method":"m"}'
    assert core.encode_error(id_, 1, "e") == b'{"jsonrpc":"2.0","id":' + expected + b',"error":{"code":1,"message":"e"}}'


@pytest.mark.parametrize("id_", [True, False, 1.0, None, [1], {"a": 1}, b"1", "\ud800"])
def test_bad_ids(core: ModuleType, id_: Any) -> None:
    with pytest.raises(TypeError):
        core.encode_result(id_, 1)
    with pytest.raises(TypeError):
        core.encode_request(id_, "m")
    if id_ is not None:
        with pytest.raises(TypeError):
            core.encode_error(id_, 1, "m")


@pytest.mark.parametrize("method", [None, 1, b"m"])
def test_bad_method(core: ModuleType, method: Any) -> None:
    with pytest.raises(TypeError):
        core.encode_request(1, method)
    with pytest.raises(TypeError):
        core.encode_notification(method)


# ------------------------------------------------------------------------------------ strings


def test_string_escaping(core: ModuleType) -> None:
    s = '\x00\x01\x08\t\n\x0b\x0c\r\x1f "\\/\x7f\u2028é😀'
    out = core.encode_result(1, s)
    assert out == (
        b'{"jsonrpc":"2.0","id":1,"result":"\\u0000\\u0001\\b\\t\\n\\u000b\\f\\r\\u001f \\"\\\\/\x7f' + "\u2028é😀".encode() + b'"}'
    )


def test_keys_are_escaped(core: ModuleType) -> None:
    assert core.encode_result(1, {'k"\n': 1}) == b'{"jsonrpc":"2.0","id":1,"result":{"k\\"\\n":1}}'


@pytest.mark.parametrize("value", ["\ud800", ["a\udfffb"], {"k": "\ud83d"}, {"\udc00": 1}])
def test_lone_surrogate_is_type_error(core: ModuleType, value: Any) -> None:
    with pytest.raises(TypeError):
        core.encode_result(1, value)


# ------------------------------------------------------------------------------------ numbers


@pytest.mark.parametrize(
    "value, expected",
    [
        (1e16, b"1e+16"),
        (1e-7, b"1e-7"),
        (100.0, b"100.0"),
        (0.1, b"0.1"),
        (-0.0, b"-0.0"),
        (1.5, b"1.5"),
        (123456789.125, b"123456789.125"),
        (1.7976931348623157e308, b"1.7976931348623157e+308"),
        (5e-324, b"5e-324"),
        (float("nan"), b"null"),
        (float("inf"), b"null"),
        (float("-inf"), b"null"),
        (2**64 - 1, b"18446744073709551615"),
        (-(2**63), b"-9223372036854775808"),
    ],
)
def test_numbers(core: ModuleType, value: Any, expected: bytes) -> None:
    assert core.encode_result(1, [value]) == b'{"jsonrpc":"2.0","id":1,"result":[' + expected + b"]}"


@pytest.mark.parametrize("value", [2**64, -(2**63) - 1, 10**30])
def test_int_out_of_range_is_type_error(core: ModuleType, value: int) -> None:
    with pytest.raises(TypeError):
        core.encode_result(1, {"n": value})
    with pytest.raises(TypeError):
        core.encode_request(1, "m", [value])


# -------------------------------------------------------------------------------- other types


@pytest.mark.parametrize(
    "value, expected",
    [
        (Color.RED, b'"red"'),
        (Level.HIGH, b"3"),
        (uuid.UUID(int=0x1234), b'"00000000-0000-0000-0000-000000001234"'),
        (MyStr("x"), b'"x"'),
        (MyInt(7), b"7"),
        (MyFloat(2.5), b"2.5"),
        (MyDict(a=1), b'{"a":1}'),
        (MyList([1, 2]), b"[1,2]"),
        (MyTuple((1, 2)), b"[1,2]"),
        (Point(1, 2), b"[1,2]"),
        ({MyStr("k"): 1}, b'{"k":1}'),
        ({"a": (1, [2, (3,)])}, b'{"a":[1,[2,[3]]]}'),
    ],
)
def test_supported_types(core: ModuleType, value: Any, expected: bytes) -> None:
    assert core.encode_result(1, value) == b'{"jsonrpc":"2.0","id":1,"result":' + expected + b"}"


@pytest.mark.parametrize(
    "value",
    [
        {1: "int key"},
        {None: 1},
        {(1, 2): 1},
        {1, 2},
        frozenset(),
        bytearray(b"x"),
        [b"nested bytes"],
        {"a": b"nested bytes"},
        object(),
        DC(),
        datetime.datetime(2025, 1, 1),
        datetime.date(2025, 1, 1),
        decimal.Decimal("1.5"),
        1j,
        [{"k": {2: 3}}],
    ],
)
def test_unsupported_values_are_type_errors(core: ModuleType, value: Any) -> None:
    with pytest.raises(TypeError):
        core.encode_result(1, value)
    with pytest.raises(TypeError):
        core.encode_notification("m", [value])
    with pytest.raises(TypeError):
        core.encode_error(1, 1, "m", [value])


def test_nesting_limit(core: ModuleType) -> None:
    out = core.encode_result(1, nest(254))
    assert out == b'{"jsonrpc":"2.0","id":1,"result":' + b"[" * 254 + b"0" + b"]" * 254 + b"}"
    with pytest.raises(TypeError):
        core.encode_result(1, nest(255))
    with pytest.raises(TypeError):
        core.encode_request(1, "m", nest(300))


def test_round_trip_through_decode(core: ModuleType) -> None:
    params = {"name": "t", "arguments": {"a": [1, 2.5, None, True, "é\n"], "b": {"c": {}}}}
    m = core.decode(core.encode_request(2**70, "tools/call", params))
    assert (m.kind, m.id, m.method, m.params) == ("request", 2**70, "tools/call", params)
    r = core.decode(core.encode_result(m.id, {"ok": True}))
    assert (r.kind, r.id, r.result) == ("result", 2**70, {"ok": True})
    e = core.decode(core.encode_error("q", -32602, "bad", {"x": 1}))
    assert (e.kind, e.id, e.error) == ("error", "q", {"code": -32602, "message": "bad", "data": {"x": 1}})
