"""Search filters as SQL conditions on the chunks table alone (c), so the vector
search stays a single-table index scan; values travel as parameters."""
import json
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from chalicelib.storage.scope import VISIBLE_ENTRY

# Bedrock's RetrievalFilter operators on one metadata attribute, and how each reads.
COMPARISONS = ("equals", "notEquals", "greaterThan", "greaterThanOrEquals", "lessThan",
               "lessThanOrEquals", "in", "notIn", "startsWith", "listContains", "stringContains")
GROUPS = ("andAll", "orAll")
NUMERIC = {"greaterThan": ">", "greaterThanOrEquals": ">=", "lessThan": "<", "lessThanOrEquals": "<="}


@dataclass(frozen=True)
class Condition:
    """One operator on one metadata attribute: {"equals": {"key": "team", "value": "energy"}}."""
    operator: str
    key: str
    value: Any


@dataclass(frozen=True)
class Group:
    operator: str  # andAll or orAll
    members: tuple["Expression", ...]


Expression = Union[Condition, Group]


@dataclass(frozen=True)
class SearchFilters:
    filename: Optional[str] = None  # a glob: * matches any run of characters
    tags: tuple[str, ...] = ()
    document_ids: tuple[str, ...] = ()
    metadata: dict = field(default_factory=dict)  # attribute values the chunk must contain
    expression: Optional[Expression] = None  # the `filter` field, in Bedrock's shape
    user_id: Optional[str] = None  # the document's uploader or the entry's writer (documents.created_by)
    entries: bool = False  # internal: only the entries the caller may read (scope.VISIBLE_ENTRY)


def _like_pattern(glob: str) -> str:
    return _like_escape(glob).replace("*", "%")


def filter_sql(filters: SearchFilters, params: dict) -> str:
    """' AND …' for each filter set; its values are added to params. Expects %(kb_ids)s."""
    clauses = []
    if filters.filename:
        params["f_filename"] = _like_pattern(filters.filename)
        clauses.append("c.document_id IN (SELECT f.id FROM documents f WHERE f.kb_id = ANY(%(kb_ids)s)"
                       " AND f.filename LIKE %(f_filename)s)")
    if filters.user_id is not None:
        params["f_user"] = filters.user_id
        clauses.append("c.document_id IN (SELECT u.id FROM documents u WHERE u.kb_id = ANY(%(kb_ids)s)"
                       " AND u.created_by = %(f_user)s)")
    if filters.document_ids:
        params["f_documents"] = list(filters.document_ids)
        clauses.append("c.document_id = ANY(%(f_documents)s)")
    if filters.tags:
        params["f_tags"] = list(filters.tags)
        clauses.append("((jsonb_typeof(c.metadata->'tags') = 'array' AND c.metadata->'tags' ?| %(f_tags)s)"
                       " OR c.metadata->>'tags' = ANY(%(f_tags)s))")
    if filters.metadata:
        params["f_metadata"] = json.dumps(filters.metadata)
        clauses.append("c.metadata @> %(f_metadata)s::jsonb")
    if filters.expression is not None:
        clauses.append(_expression_sql(filters.expression, params))
    if filters.entries:  # expects the caller's %(audiences)s (scope.scope)
        clauses.append("c.document_id IN (SELECT e.id FROM documents e WHERE e.kb_id = ANY(%(kb_ids)s)"
                       f" AND {VISIBLE_ENTRY})")
    return "".join(f" AND {clause}" for clause in clauses)


def _expression_sql(expr: Expression, params: dict) -> str:
    if isinstance(expr, Group):
        joiner = " AND " if expr.operator == "andAll" else " OR "
        return "(" + joiner.join(_expression_sql(m, params) for m in expr.members) + ")"
    n = sum(1 for name in params if name.startswith("x_key"))
    key, value = f"x_key{n}", f"x_value{n}"
    params[key] = expr.key
    attr = f"(c.metadata -> %({key})s)"
    op = expr.operator
    if op in NUMERIC:
        params[value] = expr.value
        # CASE, not AND: PostgreSQL may evaluate the cast before the type test.
        return (f"(CASE WHEN jsonb_typeof({attr}) = 'number'"
                f" THEN ({attr})::numeric {NUMERIC[op]} %({value})s ELSE false END)")
    if op in ("equals", "notEquals"):
        params[value] = json.dumps(expr.value)
        # A document without the attribute is not equal to anything (Bedrock's notEquals keeps it).
        return f"({attr} {'=' if op == 'equals' else 'IS DISTINCT FROM'} %({value})s::jsonb)"
    if op in ("in", "notIn"):
        params[value] = json.dumps(list(expr.value))
        found = f"EXISTS (SELECT 1 FROM jsonb_array_elements(%({value})s::jsonb) v WHERE v = {attr})"
        return found if op == "in" else f"(NOT {found})"
    if op == "startsWith":
        params[value] = _like_escape(expr.value) + "%"
        return f"(jsonb_typeof({attr}) = 'string' AND {_text(attr)} LIKE %({value})s)"
    if op == "listContains":
        params[value] = json.dumps([expr.value])
        return f"(jsonb_typeof({attr}) = 'array' AND {attr} @> %({value})s::jsonb)"
    if op == "stringContains":  # a string attribute, or a list with a string member, containing it
        params[value] = "%" + _like_escape(expr.value) + "%"
        return (f"(CASE jsonb_typeof({attr})"
                f" WHEN 'string' THEN {_text(attr)} LIKE %({value})s"
                f" WHEN 'array' THEN EXISTS (SELECT 1 FROM jsonb_array_elements({attr}) e"
                f" WHERE jsonb_typeof(e) = 'string' AND {_text('e')} LIKE %({value})s)"
                f" ELSE false END)")
    raise ValueError(f"unknown filter operator {op!r}")  # the parser lets none through


def _text(jsonb: str) -> str:
    """A JSON string's text. Not `#>> '{}'`: the vector search formats its SQL with
    str.format after the filters are in, and braces would be read as fields."""
    return f"(jsonb_build_array({jsonb}) ->> 0)"


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
