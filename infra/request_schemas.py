"""Writes chalicelib/compat/request_schemas.json: the JSON request bodies docs/openapi.yaml
describes for the OpenAI (/v1) and Bedrock (/knowledgebases, /retrieveAndGenerate) routes, by
operationId, with the components they refer to. The Lambda carries neither docs/ nor a YAML
reader, so the API checks bodies against this copy (chalicelib/compat/schemas.py);
tests/unit/test_request_schemas.py fails when it differs from what this script writes.

    python infra/request_schemas.py
"""
import json
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "openapi.yaml"
OUT = ROOT / "chalicelib" / "compat" / "request_schemas.json"
PREFIXES = ("/v1/", "/knowledgebases/", "/retrieveAndGenerate")
PREFIX = "#/components/schemas/"
# What documents a schema and does not check anything.
PROSE = {"description", "example", "examples", "default", "format"}


def _strip(node, in_properties: bool = False):
    """The schema without its prose (a property may be called `description`: kept)."""
    if isinstance(node, list):
        return [_strip(item) for item in node]
    if not isinstance(node, dict):
        return node
    return {key: _strip(value, key == "properties" and not in_properties)
            for key, value in node.items() if in_properties or key not in PROSE}


def _refs(node) -> set[str]:
    if isinstance(node, list):
        return set().union(*map(_refs, node)) if node else set()
    if not isinstance(node, dict):
        return set()
    found = {node["$ref"][len(PREFIX):]} if isinstance(node.get("$ref"), str) else set()
    return found.union(*map(_refs, node.values())) if node else found


def request_schemas(doc: dict) -> dict:
    operations = {}
    for path, item in doc["paths"].items():
        if not path.startswith(PREFIXES):
            continue
        for operation in item.values():
            schema = ((operation.get("requestBody") or {}).get("content") or {}).get("application/json", {})
            if "schema" in schema:
                operations[operation["operationId"]] = _strip(schema["schema"])
    components, todo = {}, sorted(_refs(operations))
    while todo:
        name = todo.pop()
        if name not in components:
            components[name] = _strip(doc["components"]["schemas"][name])
            todo += sorted(_refs(components[name]))
    return {"operations": operations, "components": {"schemas": dict(sorted(components.items()))}}


def render(doc: dict) -> str:
    return json.dumps(request_schemas(doc), indent=1, sort_keys=False) + "\n"


def main() -> int:
    OUT.write_text(render(yaml.safe_load(DOC.read_text())))
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
