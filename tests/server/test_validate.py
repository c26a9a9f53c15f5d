"""The compiled argument check agrees with jsonschema wherever it is used."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpfast.server._typeschema import type_schema
from mcpfast.server._validate import ArgumentValidator, compile_check

SCHEMAS: list[dict[str, Any]] = [
    {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "integer"}}, "required": ["a", "b"]},
    {"type": "object", "properties": {"q": {"type": "string"}}, "additionalProperties": False},
    {"type": "object", "additionalProperties": {"type": "boolean"}},
    {"type": "object", "properties": {"mode": {"enum": ["a", "b"]}, "n": {"type": ["integer", "null"]}}},
    {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}}}},
    {
        "type": "object",
        "properties": {"p": {"anyOf": [{"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}, {"type": "null"}]}},
    },
    {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "properties": {"v": {"description": "anything"}}},
    {
        "type": "object",
        "properties": {
            "nested": {"type": "object", "properties": {"deep": {"type": "array"}}, "required": ["deep"], "additionalProperties": False}
        },
    },
    {"properties": {"x": {"type": "string"}}, "required": ["x"]},  # no "type": non-objects pass
    {"type": ["object", "string"], "properties": {"x": {"type": "boolean"}}},
]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | st.sampled_from(["a", "b", "", "text"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["text", "a", "b", "q", "x", "n", "mode", "tags", "p", "v", "deep", "nested", "other"]), inner, max_size=4
        )
    ),
    max_leaves=8,
)


@pytest.mark.parametrize("schema", SCHEMAS, ids=range(len(SCHEMAS)))
@settings(max_examples=150, deadline=None)
@given(value=json_values)
def test_fast_check_equals_jsonschema(schema: dict[str, Any], value: Any) -> None:
    check = compile_check(schema)
    assert check is not None, "every schema here is simple"
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    assert check(value) == cls(schema).is_valid(value)
    validator = ArgumentValidator(schema)
    assert (validator.problem(value) is None) == cls(schema).is_valid(value)


@pytest.mark.parametrize("value", [1.0, 2, True, "1", None])
def test_integer_rules_match(value: Any) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    assert compile_check(schema)({"n": value}) == jsonschema.Draft202012Validator(schema).is_valid({"n": value})  # type: ignore[misc]


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"s": {"type": "string", "minLength": 2}}},
        {"type": "object", "properties": {"n": {"enum": [1, 2]}}},
        {"type": "object", "patternProperties": {"^x": {"type": "string"}}},
        {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object"},
        {"type": "object", "properties": {"t": {"type": "array", "prefixItems": [{"type": "string"}]}}},
        {"type": "object", "properties": {"r": {"$ref": "#/$defs/x"}}, "$defs": {"x": {"type": "string"}}},
    ],
)
def test_other_keywords_fall_back_to_jsonschema(schema: dict[str, Any]) -> None:
    assert compile_check(schema) is None
    validator = ArgumentValidator(schema)
    assert not validator.fast
    assert validator.problem({}) is None


def test_generated_schemas_are_fast() -> None:
    from typing import Annotated, Literal, TypedDict

    class Point(TypedDict):
        x: int
        y: int

    for hint in (str, int, float, bool, list[str], dict[str, int], Literal["a", "b"], Point | None, Annotated[str, "doc"], tuple[int, ...]):
        schema = {"type": "object", "properties": {"v": type_schema(hint)}, "required": ["v"]}
        assert compile_check(schema) is not None, hint


def test_problem_text_comes_from_jsonschema() -> None:
    validator = ArgumentValidator(SCHEMAS[0])
    assert validator.problem({"text": 3}) == "text: 3 is not of type 'string'"
    assert validator.problem({}) == "arguments: 'text' is a required property"
    assert list(validator.iter_errors({"text": "ok"})) == []
