"""The types of the OpenAI and Bedrock request bodies, checked at the edge before the compat
code reads a body: docs/openapi.yaml's request schemas (request_schemas.json is written from it
by infra/request_schemas.py), validated with jsonschema. The first wrong type or missing required
field is an Invalid naming its JSON path, which each API's error shape carries (OpenAI's param,
Bedrock's ValidationException message).

Only the shape is checked here: types, required fields, nested objects and lists. Values and
ranges (enum, minimum, maxLength...) and unknown fields stay with the compat code, whose messages
say why (the limits, or why a Bedrock or OpenAI field is not supported)."""
import functools
import json
from pathlib import Path

from chalicelib.errors import Invalid

SCHEMAS = Path(__file__).with_name("request_schemas.json")
# Checked by the compat code, with its own messages (limits.py's bounds, what is not supported).
VALUE_KEYWORDS = ("enum", "const", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
                  "minLength", "maxLength", "pattern", "format", "minItems", "maxItems", "uniqueItems",
                  "minProperties", "maxProperties")
_KINDS = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "a boolean",
          "array": "a list", "object": "an object"}


def _nullable(node):
    """OpenAPI 3.0's `nullable: true` as JSON Schema's type list."""
    if isinstance(node, list):
        return [_nullable(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _nullable(value) for key, value in node.items()}
    if node.pop("nullable", False) and isinstance(node.get("type"), str):
        node["type"] = [node["type"], "null"]
    return node


@functools.lru_cache(maxsize=None)
def _validators() -> dict:
    # Imported on first use: only the API function's compat routes need it (it ships in the mcp layer).
    from jsonschema import Draft202012Validator, validators

    def additional(validator, value, instance, schema):
        if value is not False:  # a schema for the values of a map (attributes); unknown names: the compat code
            yield from Draft202012Validator.VALIDATORS["additionalProperties"](validator, value, instance, schema)

    shapes = validators.extend(Draft202012Validator, {**{k: None for k in VALUE_KEYWORDS},
                                                      "additionalProperties": additional})
    document = _nullable(json.loads(SCHEMAS.read_text()))
    return {name: shapes({**schema, "components": document["components"]})
            for name, schema in document["operations"].items()}


def _where(path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "body"


def _types(schema: dict) -> list[str]:
    types = schema.get("type", "object" if "$ref" in schema or "properties" in schema else None)
    return [types] if isinstance(types, str) else types or []


def _kinds(schemas: list[dict]) -> str:
    kinds = [_KINDS[t] for schema in schemas for t in _types(schema) if t in _KINDS]
    if kinds == ["a boolean"]:
        return "true or false"
    return " or ".join(filter(None, (", ".join(kinds[:-1]), kinds[-1]))) if kinds else "something else"


def _json_type(value) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object",
            type(None): "null"}.get(type(value), "object")


def _invalid(error) -> Invalid:
    path = list(error.absolute_path)
    if error.validator == "required":
        missing = next(name for name in error.validator_value if name not in error.instance)
        return Invalid.field(_where(path + [missing]), "is required", code="MISSING_REQUIRED_PARAMETER")
    if error.validator == "type":
        return Invalid.field(_where(path), f"must be {_kinds([error.schema])}", code="INVALID_TYPE")
    if error.validator in ("anyOf", "oneOf"):
        # A value of one of the shapes' types (a list for a string-or-list) is wrong inside: say where.
        kind = _json_type(error.instance)
        fits = [i for i, shape in enumerate(error.validator_value)
                if kind in _types(shape) or (kind == "integer" and "number" in _types(shape))]
        inner = [e for e in error.context if len(fits) == 1 and e.schema_path[0] == fits[0]]
        if inner:
            return _invalid(max(inner, key=_relevance()))
        return Invalid.field(_where(path), f"must be {_kinds(error.validator_value)}", code="INVALID_TYPE")
    return Invalid.field(_where(path), error.message, code="INVALID_TYPE")


def _relevance():
    from jsonschema.exceptions import relevance

    return relevance


def check(operation: str, body: dict) -> dict:
    """The body, when its fields have the types docs/openapi.yaml gives `operation`'s request;
    else Invalid naming the first field that has not (the shallowest)."""
    errors = list(_validators()[operation].iter_errors(body))
    if errors:
        raise _invalid(max(errors, key=_relevance()))
    return body
