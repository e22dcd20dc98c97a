"""A function tool's JSON schema is data the service stores and hands to runtimes and
models; the service never fetches or executes anything it says (issue 29).

Two keywords would have it do so wherever a schema is evaluated (the MCP SDK validated a
call's arguments against it): a `$ref` to anything outside the schema is fetched
(jsonschema's remote resolution sent GET http://127.0.0.1:8766/internal/secret from the
API function), and a `pattern` runs on Python's backtracking engine (`^(a+)+$` against 40
a's and a "!" held a worker 30 s). Both are refused when a tool is written, and the MCP
server no longer evaluates tool schemas at all (api/mcp_server.py)."""
from typing import Any

from chalicelib import limits
from chalicelib.errors import Invalid

REFERENCES = ("$ref", "$dynamicRef", "$recursiveRef")
REGEX_KEYWORDS = ("pattern", "patternProperties")
# Where JSON Schema (2020-12 and the drafts before it) holds subschemas: a schema, a list
# of schemas, or an object whose values are schemas (its keys are names, not keywords).
ONE_SCHEMA = ("additionalProperties", "additionalItems", "unevaluatedItems", "unevaluatedProperties", "items",
              "contains", "propertyNames", "not", "if", "then", "else")
SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies")


def check_tool_schema(schema: Any, where: str) -> None:
    """Invalid naming the place of the first reference outside the schema or regular
    expression, or of a schema nested deeper than limits.JSON_MAX_DEPTH."""
    _check(schema, where, 0)


def _check(schema: Any, where: str, depth: int) -> None:
    if depth > limits.JSON_MAX_DEPTH:
        raise Invalid.field(where, f"nests schemas deeper than {limits.JSON_MAX_DEPTH} levels")
    if not isinstance(schema, dict):
        return  # true/false schemas, and what the lists below hold besides schemas
    for keyword in REFERENCES:
        target = schema.get(keyword)
        if target is not None and not (isinstance(target, str) and target.startswith("#")):
            raise Invalid.field(f"{where}.{keyword}", "may only point inside the schema (\"#/...\"); "
                                "the service fetches nothing a schema names")
    for keyword in REGEX_KEYWORDS:
        if keyword in schema:
            raise Invalid.field(f"{where}.{keyword}", "is not accepted: a regular expression in a tool schema "
                                "would run on the service at every call; describe the format in `description`")
    for keyword in ONE_SCHEMA:
        if isinstance(schema.get(keyword), dict):
            _check(schema[keyword], f"{where}.{keyword}", depth + 1)
    for keyword in SCHEMA_LISTS:
        if isinstance(schema.get(keyword), list):
            for i, member in enumerate(schema[keyword]):
                _check(member, f"{where}.{keyword}[{i}]", depth + 1)
    for keyword in SCHEMA_MAPS:
        if isinstance(schema.get(keyword), dict):
            for name, member in schema[keyword].items():
                _check(member, f"{where}.{keyword}.{name}", depth + 1)
