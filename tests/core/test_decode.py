"""decode(): every rule of docs/core-contract.md, against both implementations."""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any

import pytest

from mcpfast.core import FrameTooLarge, JsonRpcError

REQ = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"x":1}}}'


def nested(depth: int) -> bytes:
    """A request whose total nesting is ``depth`` (the message object is level 1)."""
    assert depth >= 2
    inner = b"[" * (depth - 1) + b"]" * (depth - 1)
    return b'{"jsonrpc":"2.0","id":1,"method":"m","params":' + inner + b"}"


def decode_error(core: ModuleType, data: Any, **kw: Any) -> JsonRpcError:
    with pytest.raises(JsonRpcError) as info:
        core.decode(data, **kw)
    return info.value


# ----------------------------------------------------------------------------------------- kinds


def test_request(core: ModuleType) -> None:
    m = core.decode(REQ)
    assert isinstance(m, core.Message)
    assert (m.kind, m.id, m.method) == ("request", 1, "tools/call")
    assert m.params == {"name": "echo", "arguments": {"x": 1}}
    assert m.raw_params == b'{"name":"echo","arguments":{"x":1}}'
    assert m.raw == REQ
    assert m.result is None and m.raw_result is None and m.error is None
    assert m.params is m.params or m.params == m.params  # cached or equal
    assert isinstance(repr(m), str) and "request" in repr(m)


def test_param(core: ModuleType) -> None:
    m = core.decode(REQ)
    assert m.param("name") == "echo"
    assert m.param("arguments") == {"x": 1}
    assert m.param("missing") is None
    assert m.param("missing", 5) == 5
    dup = core.decode(rb'{"jsonrpc":"2.0","id":1,"method":"m","params":{"name":"a","n\u0061me":"b","x":[1,{"y":2}]}}')
    assert dup.param("name") == "b"
    assert dup.param("x") == [1, {"y": 2}]
    arr = core.decode(b'{"jsonrpc":"2.0","id":1,"method":"m","params":["name"]}')
    assert arr.param("name", "d") == "d"
    none = core.decode(b'{"jsonrpc":"2.0","method":"m"}')
    assert none.param("name") is None and none.param("name", 0) == 0
    reply = core.decode(b'{"jsonrpc":"2.0","id":1,"result":{"name":"r"}}')
    assert reply.param("name", "d") == "d"


def test_param_is_not_read_from_result_or_error(core: ModuleType) -> None:
    reply = core.decode(b'{"jsonrpc":"2.0","id":1,"result":{"name":"r"}}')
    assert reply.result == {"name": "r"}
    assert reply.param("name", "d") == "d"  # also after result was parsed
    err = core.decode(b'{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m"}}')
    assert err.error == {"code": 1, "message": "m"}
    assert err.param("code", "d") == "d"


def test_request_without_params(core: ModuleType) -> None:
    m = core.decode(b'{"jsonrpc":"2.0","id":"a","method":"ping"}')
    assert (m.kind, m.id, m.method, m.params, m.raw_params) == ("request", "a", "ping", None, None)


def test_request_params_array(core: ModuleType) -> None:
    m = core.decode(b'{"jsonrpc":"2.0","id":1,"method":"m","params":[1, "two" ,null]}')
    assert m.params == [1, "two", None]
    assert m.raw_params == b'[1, "two" ,null]'


def test_notification(core: ModuleType) -> None:
    data = b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":0.5}}'
    m = core.decode(data)
    assert (m.kind, m.id, m.method) == ("notification", None, "notifications/progress")
    assert m.params == {"progressToken": "t", "progress": 0.5}
    assert m.raw_params == b'{"progressToken":"t","progress":0.5}'
    assert m.raw == data


def test_notification_without_params(core: ModuleType) -> None:
    m = core.decode(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    assert (m.kind, m.id, m.params, m.raw_params) == ("notification", None, None, None)


def test_result(core: ModuleType) -> None:
    data = b'{"jsonrpc":"2.0","id":7,"result":{ "tools" : [ ] }}'
    m = core.decode(data)
    assert (m.kind, m.id, m.method) == ("result", 7, None)
    assert m.result == {"tools": []}
    assert m.raw_result == b'{ "tools" : [ ] }'
    assert m.params is None and m.raw_params is None and m.error is None


@pytest.mark.parametrize("value", [b"null", b"0", b'"x"', b"[]", b"false", b"1.5"])
def test_result_any_value(core: ModuleType, value: bytes) -> None:
    import orjson

    m = core.decode(b'{"jsonrpc":"2.0","id":1,"result":' + value + b"}")
    assert m.kind == "result"
    assert m.result == orjson.loads(value)
    assert m.raw_result == value


def test_error_reply(core: ModuleType) -> None:
    data = b'{"jsonrpc":"2.0","id":"x","error":{"code":-32601,"message":"no such method","data":[1]}}'
    m = core.decode(data)
    assert (m.kind, m.id, m.method) == ("error", "x", None)
    assert m.error == {"code": -32601, "message": "no such method", "data": [1]}
    assert m.result is None and m.raw_result is None and m.params is None


def test_error_reply_null_id(core: ModuleType) -> None:
    m = core.decode(b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}')
    assert (m.kind, m.id) == ("error", None)
    assert m.error == {"code": -32700, "message": "parse error"}


def test_extra_members_are_ignored(core: ModuleType) -> None:
    m = core.decode(b'{"jsonrpc":"2.0","id":1,"method":"m","x":{"y":[]},"_meta":null}')
    assert (m.kind, m.id, m.method) == ("request", 1, "m")


def test_message_is_immutable(core: ModuleType) -> None:
    m = core.decode(REQ)
    for name in ("kind", "id", "method", "params", "raw"):
        with pytest.raises(AttributeError):
            setattr(m, name, None)


# ------------------------------------------------------------------------------------- inputs


def test_input_types(core: ModuleType) -> None:
    for data in (REQ, bytearray(REQ), memoryview(REQ), REQ.decode()):
        m = core.decode(data)
        assert (m.kind, m.id, m.method, m.raw, m.raw_params) == (
            "request",
            1,
            "tools/call",
            REQ,
            b'{"name":"echo","arguments":{"x":1}}',
        )


def test_str_input_unicode_raw_is_utf8(core: ModuleType) -> None:
    text = '{"jsonrpc":"2.0","id":"é","method":"ünï/😀","params":{"k":"日本"}}'
    m = core.decode(text)
    assert (m.id, m.method, m.params) == ("é", "ünï/😀", {"k": "日本"})
    assert m.raw == text.encode()
    assert m.raw_params == '{"k":"日本"}'.encode()


def test_surrounding_whitespace(core: ModuleType) -> None:
    m = core.decode(b" \t\r\n" + REQ + b"\n\r\t ")
    assert m.raw == REQ  # raw is the message value, surrounding whitespace excluded
    assert m.id == 1


def test_inner_whitespace(core: ModuleType) -> None:
    data = b'{ "jsonrpc" : "2.0" ,\n\t"id" : 3 ,\r\n "method" : "m" , "params" :\n [ 1 , 2 ] \n}'
    m = core.decode(data)
    assert (m.id, m.method, m.params) == (3, "m", [1, 2])
    assert m.raw_params == b"[ 1 , 2 ]"
    assert m.raw == data


def test_escapes(core: ModuleType) -> None:
    data = rb'{"jsonrpc":"2.0","id":"a\"b\\c\u00e9\ud83d\ude00","method":"m\/n\tx","params":{"k\"\\":"v\n"}}'
    m = core.decode(data)
    assert m.id == 'a"b\\cé😀'
    assert m.method == "m/n\tx"
    assert m.params == {'k"\\': "v\n"}
    assert m.raw_params == rb'{"k\"\\":"v\n"}'


def test_escapes_in_keys(core: ModuleType) -> None:
    data = rb'{"\u006asonrpc":"2.0","\u0069d":5,"meth\u006fd":"m","par\u0061ms":{"\u0061":[1]}}'
    m = core.decode(data)
    assert (m.kind, m.id, m.method, m.params) == ("request", 5, "m", {"a": [1]})
    assert m.raw_params == rb'{"\u0061":[1]}'


def test_duplicate_keys_last_wins(core: ModuleType) -> None:
    data = b'{"jsonrpc":"2.0","id":1,"method":"a","params":[1],"id":2,"method":"b","params" : {"x":0}}'
    m = core.decode(data)
    assert (m.id, m.method, m.params) == (2, "b", {"x": 0})
    assert m.raw_params == b'{"x":0}'


def test_duplicate_escaped_key_last_wins(core: ModuleType) -> None:
    data = rb'{"jsonrpc":"2.0","id":1,"result":[1],"r\u0065sult":"second"}'
    m = core.decode(data)
    assert m.result == "second"
    assert m.raw_result == b'"second"'


def test_brackets_inside_strings(core: ModuleType) -> None:
    data = b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":"]}[{,:\\"}","b":[{"c":"}"}]}}'
    m = core.decode(data)
    assert m.params == {"a": ']}[{,:"}', "b": [{"c": "}"}]}
    assert m.raw_params == b'{"a":"]}[{,:\\"}","b":[{"c":"}"}]}'


# ------------------------------------------------------------------------------------------ ids


@pytest.mark.parametrize(
    "literal, expected",
    [
        (b"0", 0),
        (b"-0", 0),
        (b"42", 42),
        (b"-42", -42),
        (b"9223372036854775807", 2**63 - 1),
        (b"9223372036854775808", 2**63),
        (b"18446744073709551615", 2**64 - 1),
        (b"18446744073709551616", 2**64),
        (b"-9223372036854775808", -(2**63)),
        (b"-9223372036854775809", -(2**63) - 1),
        (str(2**70).encode(), 2**70),
        (str(-(2**70)).encode(), -(2**70)),
        (b"1" + b"0" * 300, 10**300),
        (b'""', ""),
        (b'"abc"', "abc"),
    ],
)
def test_ids_exact(core: ModuleType, literal: bytes, expected: int | str) -> None:
    for data in (
        b'{"jsonrpc":"2.0","id":' + literal + b',"method":"m"}',
        b'{"jsonrpc":"2.0","id":' + literal + b',"result":null}',
        b'{"jsonrpc":"2.0","id" : ' + literal + b' ,"error":{"code":1,"message":""}}',
    ):
        m = core.decode(data)
        assert m.id == expected
        assert type(m.id) is type(expected)


def test_big_int_id_round_trip(core: ModuleType) -> None:
    for big in (2**70, -(2**70), 2**64, 10**40 + 1):
        m = core.decode(b'{"jsonrpc":"2.0","id":%d,"method":"m"}' % big)
        assert m.id == big
        assert core.encode_result(m.id, {}) == b'{"jsonrpc":"2.0","id":%d,"result":{}}' % big


def test_big_int_id_in_batch(core: ModuleType) -> None:
    data = b'[{"jsonrpc":"2.0","id":%d,"method":"a"}, {"jsonrpc":"2.0","id":%d,"method":"b"}]' % (2**70, -(2**65))
    a, b = core.decode(data)
    assert (a.id, b.id) == (2**70, -(2**65))


def test_integer_too_big_for_a_double_is_parse_error(core: ModuleType) -> None:
    err = decode_error(core, b'{"jsonrpc":"2.0","id":1' + b"0" * 400 + b',"method":"m"}')
    assert (err.code, err.id) == (-32700, None)


# ----------------------------------------------------------------------------------- -32700


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"   ",
        b"\n",
        b"{",
        b"}",
        b'{"jsonrpc":"2.0","id":1,"method":"m",}',
        b'{"jsonrpc":"2.0","id":1,"method":"m"} x',
        b'{"jsonrpc":"2.0","id":1,"method":"m"}{}',
        b"{'jsonrpc':'2.0'}",
        b'{"jsonrpc":"2.0","id":1,"method":"m","params":[NaN]}',
        b'{"jsonrpc":"2.0","id":1,"method":"m","params":[Infinity]}',
        b'{"jsonrpc":"2.0","id":1,"method":"m","params":[1e400]}',
        b'{"jsonrpc":"2.0","id":1,"method":"m","params":[-1e400]}',
        b'{"jsonrpc":"2.0","id":1,"method":"m","params":["\\ud800"]}',
        b'{"jsonrpc":"2.0","id":1,"method":"m","params":["\\udc00x"]}',
        b'{"jsonrpc":"2.0","id":1,"method":"m","params":["\xff"]}',
        b'{"jsonrpc":"2.0","id":1,"method":"m","params":["\xc3"]}',
        b'{"jsonrpc":"2.0","id":1,"method":"m","params":["\xed\xa0\x80"]}',
        b'{"jsonrpc":"2.0","id":1,"method":"m","params":["a\nb"]}',
        b'{"jsonrpc":"2.0","id":1,"method":"m","params":[01]}',
        b'{"jsonrpc":"2.0","id":1,"method":"m","params":[.5]}',
        b'{"jsonrpc":"2.0","id":1,"method":"m","params":[tru]}',
        b"\xef\xbb\xbf" + REQ,
        b"\x0c" + REQ,
        b"\x00",
    ],
)
def test_parse_errors(core: ModuleType, data: bytes) -> None:
    err = decode_error(core, data)
    assert (err.code, err.id) == (-32700, None)
    assert err.message.startswith("invalid JSON: ")
    assert isinstance(err, ValueError)


def test_str_with_lone_surrogate_is_parse_error(core: ModuleType) -> None:
    err = decode_error(core, '{"jsonrpc":"2.0","id":1,"method":"\ud800"}')
    assert (err.code, err.id) == (-32700, None)


# ------------------------------------------------------------------------------------- depth


def test_depth_at_limit(core: ModuleType) -> None:
    m = core.decode(nested(128))
    assert m.kind == "request"


def test_depth_one_beyond_limit(core: ModuleType) -> None:
    err = decode_error(core, nested(129))
    assert (err.code, err.id) == (-32700, None)
    assert err.message == "nesting exceeds max_depth of 128"


@pytest.mark.parametrize("max_depth", [1, 2, 3, 10, 200])
def test_custom_max_depth(core: ModuleType, max_depth: int) -> None:
    inner = b"[" * (max_depth - 1) + b"]" * (max_depth - 1) if max_depth > 1 else b"1"
    ok = b'{"jsonrpc":"2.0","id":1,"result":' + inner + b"}"
    assert core.decode(ok, max_depth=max_depth).kind == "result"
    bad = b'{"jsonrpc":"2.0","id":1,"result":' + b"[" * max_depth + b"]" * max_depth + b"}"
    err = decode_error(core, bad, max_depth=max_depth)
    assert err.code == -32700
    assert err.message == f"nesting exceeds max_depth of {max_depth}"


def test_scalar_top_level_has_depth_zero(core: ModuleType) -> None:
    err = decode_error(core, b"1", max_depth=1)
    assert err.code == -32600


def test_depth_mixed_objects_and_arrays(core: ModuleType) -> None:
    params = b'{"a":[{"b":[{"c":[]}]}]}'  # depth 6 inside the message: total 7
    data = b'{"jsonrpc":"2.0","id":1,"method":"m","params":' + params + b"}"
    assert core.decode(data, max_depth=7).params == {"a": [{"b": [{"c": []}]}]}
    assert decode_error(core, data, max_depth=6).code == -32700


def test_many_brackets_but_shallow(core: ModuleType) -> None:
    params = b"[" + b",".join([b"[]"] * 300) + b"," + b",".join([b'{"a":{}}'] * 300) + b"]"
    data = b'{"jsonrpc":"2.0","id":1,"method":"m","params":' + params + b"}"
    m = core.decode(data, max_depth=4)
    assert len(m.params) == 600


def test_brackets_in_strings_do_not_count(core: ModuleType) -> None:
    text = b'"' + b"[{" * 300 + b'\\"[\\\\' + b'"'
    data = b'{"jsonrpc":"2.0","id":1,"method":"m","params":[' + text + b"]}"
    m = core.decode(data, max_depth=2)
    assert m.params == ["[{" * 300 + '"[\\']


def test_very_deep_is_depth_error(core: ModuleType) -> None:
    for depth in (1025, 1026, 5000):
        err = decode_error(core, b"[" * depth + b"]" * depth)
        assert (err.code, err.id) == (-32700, None)
        assert err.message.startswith("nesting exceeds max_depth of ")


def test_max_depth_is_capped_at_1024(core: ModuleType) -> None:
    at = b'{"jsonrpc":"2.0","id":1,"result":' + b"[" * 1023 + b"]" * 1023 + b"}"  # depth 1024
    assert core.decode(at, max_depth=5000).kind == "result"
    beyond = b"[" * 1025 + b"]" * 1025
    err = decode_error(core, beyond, max_depth=5000)
    assert err.code == -32700
    assert err.message == "nesting exceeds max_depth of 1024"


def test_deep_invalid_json_is_parse_error(core: ModuleType) -> None:
    err = decode_error(core, b"[" * 200)
    assert (err.code, err.id) == (-32700, None)


@pytest.mark.parametrize("max_depth", [0, -1])
def test_bad_max_depth(core: ModuleType, max_depth: int) -> None:
    with pytest.raises(ValueError) as info:
        core.decode(REQ, max_depth=max_depth)
    assert not isinstance(info.value, JsonRpcError)


# ----------------------------------------------------------------------------------- -32600

ID7 = b'"id":7'


@pytest.mark.parametrize(
    "data, expected_id",
    [
        (b"1", None),
        (b'"x"', None),
        (b"null", None),
        (b"true", None),
        (b"3.5", None),
        (b'{"id":7,"method":"m"}', 7),
        (b'{"jsonrpc":"1.0","id":7,"method":"m"}', 7),
        (b'{"jsonrpc":2.0,"id":7,"method":"m"}', 7),
        (b'{"jsonrpc":null,"id":"s","method":"m"}', "s"),
        (b'{"jsonrpc":"2.0 ","id":7,"result":1}', 7),
        (b'{"jsonrpc":"2.0","id":7,"method":1}', 7),
        (b'{"jsonrpc":"2.0","id":7,"method":null}', 7),
        (b'{"jsonrpc":"2.0","id":7,"method":["m"]}', 7),
        (b'{"jsonrpc":"2.0","id":7,"method":"m","result":1}', 7),
        (b'{"jsonrpc":"2.0","id":7,"method":"m","error":{"code":1,"message":""}}', 7),
        (b'{"jsonrpc":"2.0","method":"m","result":null}', None),
        (b'{"jsonrpc":"2.0","id":7,"method":"m","params":1}', 7),
        (b'{"jsonrpc":"2.0","id":7,"method":"m","params":"x"}', 7),
        (b'{"jsonrpc":"2.0","id":7,"method":"m","params":null}', 7),
        (b'{"jsonrpc":"2.0","id":7,"method":"m","params":true}', 7),
        (b'{"jsonrpc":"2.0","method":"m","params":1}', None),
        (b'{"jsonrpc":"2.0","id":null,"method":"m"}', None),
        (b'{"jsonrpc":"2.0","id":1.0,"method":"m"}', None),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"m"}', None),
        (b'{"jsonrpc":"2.0","id":1e3,"method":"m"}', None),
        (b'{"jsonrpc":"2.0","id":1E3,"method":"m"}', None),
        (b'{"jsonrpc":"2.0","id":-0.0,"method":"m"}', None),
        (b'{"jsonrpc":"2.0","id":true,"method":"m"}', None),
        (b'{"jsonrpc":"2.0","id":false,"result":1}', None),
        (b'{"jsonrpc":"2.0","id":[1],"method":"m"}', None),
        (b'{"jsonrpc":"2.0","id":{},"result":1}', None),
        (b'{"jsonrpc":"2.0","result":1}', None),
        (b'{"jsonrpc":"2.0","error":{"code":1,"message":""}}', None),
        (b'{"jsonrpc":"2.0","id":7}', 7),
        (b'{"jsonrpc":"2.0","id":7,"result":1,"error":{"code":1,"message":""}}', 7),
        (b'{"jsonrpc":"2.0","id":null,"result":1}', None),
        (b'{"jsonrpc":"2.0","id":1.5,"result":1}', None),
        (b'{"jsonrpc":"2.0","id":7,"error":null}', 7),
        (b'{"jsonrpc":"2.0","id":7,"error":"boom"}', 7),
        (b'{"jsonrpc":"2.0","id":7,"error":[]}', 7),
        (b'{"jsonrpc":"2.0","id":7,"error":{"message":"m"}}', 7),
        (b'{"jsonrpc":"2.0","id":7,"error":{"code":1}}', 7),
        (b'{"jsonrpc":"2.0","id":7,"error":{"code":"1","message":"m"}}', 7),
        (b'{"jsonrpc":"2.0","id":7,"error":{"code":1.0,"message":"m"}}', 7),
        (b'{"jsonrpc":"2.0","id":7,"error":{"code":true,"message":"m"}}', 7),
        (b'{"jsonrpc":"2.0","id":7,"error":{"code":1,"message":null}}', 7),
        (b'{"jsonrpc":"2.0","id":7,"error":{"code":1' + b"0" * 25 + b',"message":"m"}}', 7),
        (b'{"jsonrpc":"2.0","id":"q","error":{"code":1,"message":2}}', "q"),
        (b'{"jsonrpc":"2.0","id":%d,"method":1}' % 2**70, 2**70),
        (b'{"jsonrpc":"2.0","id":1.5,"error":{"code":1,"message":"m"}}', None),
    ],
)
def test_invalid_requests(core: ModuleType, data: bytes, expected_id: int | str | None) -> None:
    err = decode_error(core, data)
    assert err.code == -32600, err.message
    assert err.id == expected_id
    assert type(err.id) is type(expected_id)
    assert isinstance(err.message, str) and err.message


@pytest.mark.parametrize(
    "data, message",
    [
        (b"[1]", "a JSON-RPC message must be an object"),
        (b'{"jsonrpc":"2.1","method":"m"}', '"jsonrpc" must be exactly "2.0"'),
        (b'{"jsonrpc":"2.0","method":7}', '"method" must be a string'),
        (b'{"jsonrpc":"2.0","method":"m","result":1}', 'a request must not carry "result" or "error"'),
        (b'{"jsonrpc":"2.0","method":"m","params":1}', '"params" must be an object or an array'),
        (b'{"jsonrpc":"2.0","id":true,"method":"m"}', '"id" must be a string or an integer'),
        (b'{"jsonrpc":"2.0","id":null,"method":"m"}', '"id" may be null only in an error reply'),
        (b'{"jsonrpc":"2.0","result":1}', 'a reply must have an "id"'),
        (b'{"jsonrpc":"2.0","id":1}', 'a reply must have exactly one of "result" and "error"'),
        (b'{"jsonrpc":"2.0","id":1,"error":{}}', '"error" must be an object with an integer "code" and a string "message"'),
    ],
)
def test_invalid_request_messages(core: ModuleType, data: bytes, message: str) -> None:
    result = core.decode(b"[" + data + b"]")  # single rule broken: the message is fixed
    assert len(result) == 1
    assert isinstance(result[0], JsonRpcError)
    assert result[0].message == message


# ------------------------------------------------------------------------------------- batch


def test_empty_batch(core: ModuleType) -> None:
    for data in (b"[]", b" [ \n ] "):
        err = decode_error(core, data)
        assert (err.code, err.id, err.message) == (-32600, None, "empty batch")


def test_batch(core: ModuleType) -> None:
    e1 = b'{"jsonrpc":"2.0","id":1,"method":"a","params":[1]}'
    e2 = b'{"jsonrpc":"2.0","method":"n"}'
    e3 = b'{ "jsonrpc":"2.0", "id":"r", "result":{"k":"]"} }'
    data = b"[ " + e1 + b" ,\n" + e2 + b"," + e3 + b"\t]"
    out = core.decode(data)
    assert isinstance(out, list) and len(out) == 3
    assert [(m.kind, m.id, m.method) for m in out] == [
        ("request", 1, "a"),
        ("notification", None, "n"),
        ("result", "r", None),
    ]
    assert [m.raw for m in out] == [e1, e2, e3]
    assert out[0].raw_params == b"[1]"
    assert out[2].raw_result == b'{"k":"]"}'
    assert out[2].result == {"k": "]"}


def test_batch_with_invalid_elements(core: ModuleType) -> None:
    data = (
        b'[1, {"jsonrpc":"2.0","id":5,"method":"ok"}, {"jsonrpc":"1.0","id":"x","method":"m"},'
        b' [], null, {"jsonrpc":"2.0","id":%d,"error":{}}, {"jsonrpc":"2.0","id":2.5,"method":"m"}]' % 2**70
    )
    out = core.decode(data)
    assert len(out) == 7
    assert isinstance(out[1], core.Message) and out[1].id == 5
    errors = [out[i] for i in (0, 2, 3, 4, 5, 6)]
    assert all(isinstance(e, JsonRpcError) for e in errors)
    assert [(e.code, e.id) for e in errors] == [
        (-32600, None),
        (-32600, "x"),
        (-32600, None),
        (-32600, None),
        (-32600, 2**70),
        (-32600, None),
    ]


def test_batch_depth_counts_the_array(core: ModuleType) -> None:
    data = b'[{"jsonrpc":"2.0","id":1,"result":[]}]'  # depth 3
    assert core.decode(data, max_depth=3)[0].result == []
    assert decode_error(core, data, max_depth=2).code == -32700


def test_batch_raw_with_duplicate_and_escaped_keys(core: ModuleType) -> None:
    e = rb'{"jsonrpc":"2.0","id":1,"method":"m","params":[0],"p\u0061rams":{"a":"\"]"}}'
    out = core.decode(b"[" + e + b"," + e + b"]")
    assert [m.raw for m in out] == [e, e]
    assert [m.raw_params for m in out] == [rb'{"a":"\"]"}'] * 2


# ------------------------------------------------------------------------------ value model


def test_values_follow_orjson(core: ModuleType) -> None:
    data = (
        b'{"jsonrpc":"2.0","id":1,"method":"m","params":[18446744073709551615,18446744073709551616,'
        b"-9223372036854775808,-9223372036854775809,-0,-0.0,1e2,1.5e-7,0.1,true,false,null]}"
    )
    p = core.decode(data).params
    assert p[0] == 2**64 - 1 and type(p[0]) is int
    assert type(p[1]) is float and p[1] == float(2**64)
    assert p[2] == -(2**63) and type(p[2]) is int
    assert type(p[3]) is float
    assert p[4] == 0 and type(p[4]) is int
    assert type(p[5]) is float and math.copysign(1.0, p[5]) == -1.0
    assert p[6] == 100.0 and type(p[6]) is float
    assert p[7:] == [1.5e-7, 0.1, True, False, None]


def test_unicode_values(core: ModuleType) -> None:
    data = '{"jsonrpc":"2.0","id":1,"method":"m","params":{"ключ":"値 😀 \\u2028 \\u0000"}}'.encode()
    assert core.decode(data).params == {"ключ": "値 😀 \u2028 \x00"}


def test_error_classes_are_shared(core: ModuleType) -> None:
    assert core.JsonRpcError is JsonRpcError
    assert core.FrameTooLarge is FrameTooLarge
