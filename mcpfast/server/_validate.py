"""Argument validation for tools: a compiled fast check for simple schemas, jsonschema for the rest.

Most tool input schemas (and every one ``function_schema`` generates from plain type hints) use a
handful of keywords: ``type``, ``properties``, ``required``, ``additionalProperties``, ``items``,
``anyOf`` and string ``enum``s. For those, ``compile_check`` builds a predicate out of nested
closures that answers "valid or not" in well under a microsecond for small argument objects. It
agrees with jsonschema exactly on the keywords it accepts (the same type rules: ``integer``
accepts ``1.0``, ``bool`` is never a number); a schema using any other keyword gets no fast check.

``ArgumentValidator.problem(args)`` returns ``None`` for valid arguments and otherwise the error
text. The text always comes from jsonschema: the fast check only decides whether jsonschema must
be asked, so error messages are the same with or without the fast path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Protocol

from mcpfast.server.types import JSONObject

__all__ = ["ArgumentValidator", "SchemaError", "SchemaValidator", "compile_check", "schema_validator"]

Check = Callable[[object], bool]
"""A predicate on a JSON value: true when the value is valid."""


class SchemaError(Protocol):
    """What the server reads of one jsonschema ``ValidationError``."""

    @property
    def message(self) -> str: ...
    @property
    def path(self) -> Sequence[str | int]:
        """Where in the instance (keys and indexes from the root)."""


class SchemaValidator(Protocol):
    """What the server uses of a jsonschema validator."""

    def iter_errors(self, instance: object) -> Iterator[SchemaError]: ...


def schema_validator(schema: JSONObject) -> SchemaValidator:
    """jsonschema's validator for ``schema``: its ``$schema`` dialect, 2020-12 when it names none."""
    import jsonschema

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    validator: SchemaValidator = cls(schema)
    return validator


# Keywords that never affect validity (annotations; format is not asserted by default).
_ANNOTATIONS = frozenset(
    {"title", "description", "default", "examples", "$comment", "deprecated", "readOnly", "writeOnly", "format", "x-mcp-header"}
)
_DIALECTS = frozenset(
    {
        "http://json-schema.org/draft-06/schema",
        "http://json-schema.org/draft-07/schema",
        "https://json-schema.org/draft/2019-09/schema",
        "https://json-schema.org/draft/2020-12/schema",
    }
)
_HANDLED = frozenset({"type", "properties", "required", "additionalProperties", "items", "anyOf", "enum"})


def _is_integer(value: object) -> bool:
    t = type(value)
    if t is int:
        return True
    if t is bool:
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and value.is_integer()


def _is_number(value: object) -> bool:
    t = type(value)
    if t is float or t is int:
        return True
    return t is not bool and isinstance(value, int | float)


_TYPE_CHECKS: dict[str, Check] = {
    "string": lambda v: isinstance(v, str),
    "integer": _is_integer,
    "number": _is_number,
    "boolean": lambda v: v is True or v is False,
    "null": lambda v: v is None,
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
}


def compile_check(schema: object, *, top: bool = True) -> Check | None:
    """A predicate equivalent to jsonschema validity for ``schema``, or ``None`` if it is not simple.

    Args:
        schema: a JSON Schema (boolean or object).
        top: whether this is the root (only there may ``$schema`` appear).
    """
    if schema is True or schema == {}:
        return _always
    if schema is False:
        return _never
    if not isinstance(schema, dict):
        return None
    keys = set(schema) - _ANNOTATIONS
    if top and "$schema" in schema:
        dialect = schema["$schema"]
        if not isinstance(dialect, str) or dialect.rstrip("#") not in _DIALECTS:
            return None  # draft-04 and older count 1.0 as a non-integer: leave them to jsonschema
        keys.discard("$schema")
    if keys - _HANDLED:
        return None
    checks: list[Check] = []
    object_only = False

    if "type" in schema:
        declared = schema["type"]
        names = [declared] if isinstance(declared, str) else declared
        if not isinstance(names, list) or not names or not all(isinstance(n, str) and n in _TYPE_CHECKS for n in names):
            return None
        if names == ["object"]:
            object_only = True  # folded into the object check below
        elif len(names) == 1:
            checks.append(_TYPE_CHECKS[names[0]])
        else:
            alternatives = tuple(_TYPE_CHECKS[n] for n in names)

            def any_of(v: object, alts: tuple[Check, ...] = alternatives) -> bool:
                return any(check(v) for check in alts)

            checks.append(any_of)

    if "enum" in schema:
        values = schema["enum"]
        # jsonschema compares a str to anything with ==, so a str-only enum is a set lookup.
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            return None
        allowed = frozenset(values)
        checks.append(lambda v: isinstance(v, str) and v in allowed)

    if "anyOf" in schema:
        branches = schema["anyOf"]
        if not isinstance(branches, list) or not branches:
            return None
        compiled = [compile_check(b, top=False) for b in branches]
        if any(c is None for c in compiled):
            return None
        options = tuple(c for c in compiled if c is not None)
        checks.append(lambda v: any(check(v) for check in options))

    if "items" in schema:
        item_check = compile_check(schema["items"], top=False)
        if item_check is None:
            return None
        if item_check is not _always:
            checks.append(lambda v: not isinstance(v, list) or all(item_check(x) for x in v))

    object_check = _object_check(schema, object_only)
    if object_check is False:
        return None
    if object_check is not None:
        checks.append(object_check)  # type: ignore[arg-type]  # a check: _object_check never returns True
    elif object_only:
        checks.append(_TYPE_CHECKS["object"])

    if not checks:
        return _always
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        first, second = checks
        return lambda v: first(v) and second(v)
    all_checks = tuple(checks)
    return lambda v: all(check(v) for check in all_checks)


def _object_check(schema: JSONObject, must_be_object: bool) -> Check | bool | None:
    """The check of properties/required/additionalProperties; False when not simple.

    With ``must_be_object`` (``"type": "object"``) a non-object fails; otherwise the keywords
    simply do not apply to it.
    """
    props = schema.get("properties", {})
    required = schema.get("required", [])
    additional = schema.get("additionalProperties", True)
    if not isinstance(props, dict) or not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        return False
    prop_checks: dict[str, Check] = {}
    for key, sub in props.items():
        check = compile_check(sub, top=False)
        if check is None:
            return False
        if check is not _always:
            prop_checks[key] = check
    extra_check = compile_check(additional, top=False)
    if extra_check is None:
        return False
    if not prop_checks and not required and extra_check is _always:
        return None  # (the caller adds the bare type check when it is wanted)
    not_object = not must_be_object
    needed = tuple(dict.fromkeys(required))
    items = tuple(prop_checks.items())
    known = frozenset(props)

    if extra_check is _always:

        def check_object(v: object) -> bool:
            if not isinstance(v, dict):
                return not_object
            for key in needed:
                if key not in v:
                    return False
            for key, check in items:  # a loop, not all(...): no generator per call on the hot path
                if key in v and not check(v[key]):
                    return False
            return True

        return check_object

    def check_object_strict(v: object) -> bool:
        if not isinstance(v, dict):
            return not_object
        for key in needed:
            if key not in v:
                return False
        for key, value in v.items():
            if key in known:
                check = prop_checks.get(key)
                if check is not None and not check(value):
                    return False
            elif not extra_check(value):
                return False
        return True

    return check_object_strict


def _always(_: object) -> bool:
    return True


def _never(_: object) -> bool:
    return False


class ArgumentValidator:
    """Validates tool arguments against an ``inputSchema`` (fast check first, jsonschema for errors).

    Attributes:
        fast: whether the schema got a compiled fast check.
        check: that check (``check(args)`` true means valid), or ``None``.
    """

    __slots__ = ("_check", "_schema", "_validator", "fast")

    def __init__(self, schema: JSONObject) -> None:
        self._schema = schema
        self._check = compile_check(schema)
        self.fast = self._check is not None
        self._validator: SchemaValidator | None = None

    @property
    def check(self) -> Check | None:
        """The compiled predicate (``None`` when the schema is not simple enough for one)."""
        return self._check

    @property
    def jsonschema(self) -> SchemaValidator:
        """The jsonschema validator (built on first use)."""
        if self._validator is None:
            self._validator = schema_validator(self._schema)
        return self._validator

    def problem(self, args: object) -> str | None:
        """``None`` when ``args`` is valid, else a short description of what is wrong."""
        check = self._check
        if check is not None and check(args):
            return None
        errors = sorted(self.jsonschema.iter_errors(args), key=lambda e: list(e.path))
        if not errors:
            return None
        return "; ".join(f"{'/'.join(map(str, e.path)) or 'arguments'}: {e.message}" for e in errors[:5])

    def iter_errors(self, instance: object) -> Iterator[SchemaError]:
        """jsonschema's ``iter_errors`` (kept so callers of the old validator object still work)."""
        check = self._check
        if check is not None and check(instance):
            return iter(())
        return self.jsonschema.iter_errors(instance)
