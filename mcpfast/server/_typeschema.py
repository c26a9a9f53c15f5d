"""Python type hints to JSON Schema, for tool ``inputSchema``/``outputSchema`` and prompt arguments.

Covers the JSON-native types a tool receives as arguments: str, int, float, bool, None, list,
tuple, dict[str, T], Optional/Union, Literal, Enum, TypedDict, dataclasses and
``Annotated[T, "description"]``. Anything else raises ``TypeError`` at registration, so a
schema is never silently wrong.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import types
import typing
from typing import Any, get_args, get_origin, get_type_hints

from mcpfast.server.types import JSONObject, UserFunction

__all__ = ["function_schema", "type_schema"]

_PRIMITIVES: dict[object, JSONObject] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
    Any: {},
    object: {},
}


def type_schema(tp: Any) -> JSONObject:
    """The JSON Schema of one type hint (``Any``: whatever a hint can be, a class, a typing form, a
    string left unresolved; it is told apart at run time).

    Raises:
        TypeError: a type with no JSON representation.
    """
    if tp in _PRIMITIVES:
        return dict(_PRIMITIVES[tp])
    origin = get_origin(tp)
    args = get_args(tp)
    if origin is typing.Annotated:
        annotated = type_schema(args[0])
        for extra in args[1:]:
            if isinstance(extra, str):
                annotated["description"] = extra
        return annotated
    if origin in (typing.Union, types.UnionType):
        non_null = [a for a in args if a is not type(None)]
        options = [type_schema(a) for a in non_null]
        if len(non_null) < len(args):
            options.append({"type": "null"})
        return options[0] if len(options) == 1 else {"anyOf": options}
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin in (list, set, frozenset, typing.Sequence) or tp in (list, set, frozenset):
        schema: JSONObject = {"type": "array"}
        if args:
            schema["items"] = type_schema(args[0])
        return schema
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": type_schema(args[0])}
        return {"type": "array", "prefixItems": [type_schema(a) for a in args], "minItems": len(args), "maxItems": len(args)}
    if origin is dict or tp is dict:
        schema = {"type": "object"}
        if args and args[0] is not str:
            raise TypeError(f"dict keys must be str for JSON, not {args[0]!r}")
        if args:
            schema["additionalProperties"] = type_schema(args[1])
        return schema
    if inspect.isclass(tp) and issubclass(tp, enum.Enum):
        return {"enum": [member.value for member in tp]}
    if typing.is_typeddict(tp):
        hints = get_type_hints(tp, include_extras=True)
        required = sorted(getattr(tp, "__required_keys__", hints.keys()))
        return _object({k: type_schema(v) for k, v in hints.items()}, required, tp.__name__)
    if dataclasses.is_dataclass(tp) and inspect.isclass(tp):
        hints = get_type_hints(tp, include_extras=True)
        props: JSONObject = {}
        required = []
        for f in dataclasses.fields(tp):
            props[f.name] = type_schema(hints[f.name])
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                required.append(f.name)
        return _object(props, required, tp.__name__)
    raise TypeError(f"no JSON Schema for type {tp!r}")


def _object(props: JSONObject, required: list[str], title: str | None = None) -> JSONObject:
    schema: JSONObject = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    if title:
        schema["title"] = title
    return schema


def function_schema(fn: UserFunction, skip: frozenset[str]) -> tuple[JSONObject, list[str]]:
    """The object schema of a function's parameters, and their names in order.

    Args:
        fn: the function.
        skip: parameter names that are not arguments (e.g. the Context parameter).

    Raises:
        TypeError: ``*args``/``**kwargs`` or a parameter type with no JSON Schema.
    """
    hints = get_type_hints(fn, include_extras=True)
    props: JSONObject = {}
    required: list[str] = []
    names: list[str] = []
    for name, param in inspect.signature(fn).parameters.items():
        if name in skip:
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"{fn.__qualname__}: *args/**kwargs cannot be described as tool arguments")
        schema = type_schema(hints.get(name, Any))
        if param.default is param.empty:
            required.append(name)
        elif _jsonable(param.default):
            schema["default"] = param.default
        props[name] = schema
        names.append(name)
    out: JSONObject = {"type": "object", "properties": props}
    if required:
        out["required"] = required
    return out, names


def _jsonable(value: object) -> bool:
    return value is None or isinstance(value, str | int | float | bool)
