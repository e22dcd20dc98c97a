"""A function tool's schema is data: nothing it names is fetched, no regular expression in
it runs (issue 29; agents/schemas.py)."""
import pytest

from chalicelib import limits
from chalicelib.agents.schemas import check_tool_schema
from chalicelib.errors import Invalid

PLAIN = {"type": "object", "properties": {
    "city": {"type": "string", "description": "a city"},
    "pattern": {"type": "string"},  # a property named like a keyword is only a name
    "when": {"$ref": "#/$defs/date"}},
    "$defs": {"date": {"type": "string", "format": "date"}}, "required": ["city"]}


def test_a_schema_of_data_and_local_references_passes():
    check_tool_schema(PLAIN, "availableTools[0].schema")
    check_tool_schema(True, "availableTools[0].schema")


@pytest.mark.parametrize("schema,where", [
    ({"$ref": "http://127.0.0.1:8766/internal/secret"}, "s.$ref"),
    ({"properties": {"a": {"$ref": "other.json#/x"}}}, "s.properties.a.$ref"),
    ({"anyOf": [{"type": "string"}, {"$dynamicRef": "https://example.org/x"}]}, "s.anyOf[1].$dynamicRef"),
    ({"items": {"$ref": "file:///etc/passwd"}}, "s.items.$ref"),
    ({"$defs": {"d": {"$ref": 7}}}, "s.$defs.d.$ref"),
])
def test_a_reference_outside_the_schema_is_refused_where_it_stands(schema, where):
    with pytest.raises(Invalid) as raised:
        check_tool_schema(schema, "s")
    assert raised.value.message.startswith(where) and "inside the schema" in raised.value.message


@pytest.mark.parametrize("schema,where", [
    ({"type": "string", "pattern": "^(a+)+$"}, "s.pattern"),
    ({"properties": {"code": {"allOf": [{"pattern": "x"}]}}}, "s.properties.code.allOf[0].pattern"),
    ({"patternProperties": {"^(a|a)*$": {}}}, "s.patternProperties"),
    ({"additionalProperties": {"not": {"pattern": "(x+x+)+y"}}}, "s.additionalProperties.not.pattern"),
])
def test_a_regular_expression_is_refused_where_it_stands(schema, where):
    with pytest.raises(Invalid) as raised:
        check_tool_schema(schema, "s")
    assert raised.value.message.startswith(where) and "regular expression" in raised.value.message


def test_a_schema_nested_past_the_limit_is_refused():
    schema = {"type": "string"}
    for _ in range(limits.JSON_MAX_DEPTH + 1):
        schema = {"not": schema}
    with pytest.raises(Invalid) as raised:
        check_tool_schema(schema, "s")
    assert "deeper than" in raised.value.message
