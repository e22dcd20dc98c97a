"""Checks for request fields, shared by the HTTP edge and the domain parsers (search
requests, tool arguments). Each raises errors.Invalid naming the field."""
import math
from datetime import datetime, timezone
from typing import Any, Optional

from chalicelib import limits
from chalicelib.errors import Invalid

INT_MAX_DIGITS = 18  # a bigint's; no integer the API takes is longer


def _bad_text(value: str) -> bool:
    """NUL cannot be stored in PostgreSQL text, and a lone surrogate is not Unicode."""
    if "\x00" in value:
        return True
    try:
        value.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


def check_text(value: Any, path: str = "body") -> None:
    """Refuse, naming where, what a JSON document should not carry: a string (key or
    value) that cannot be stored as text, a number that is not finite (Python's json
    reads NaN and Infinity), nesting deeper than limits.JSON_MAX_DEPTH. Iterative,
    so no payload can exhaust the interpreter's stack."""
    pending = [(value, path, 0)]
    while pending:
        item, where, depth = pending.pop()
        if depth > limits.JSON_MAX_DEPTH:
            raise Invalid.field(where, f"nests deeper than {limits.JSON_MAX_DEPTH} levels")
        if isinstance(item, str):
            if _bad_text(item):
                raise Invalid.field(where, "contains a NUL character or invalid Unicode")
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise Invalid.field(where, "must be a finite number (NaN and Infinity are not JSON)")
        elif isinstance(item, dict):
            children = []
            for key, child in item.items():
                if isinstance(key, str) and _bad_text(key):
                    raise Invalid.field(where, "contains a NUL character or invalid Unicode")
                children.append((child, f"{where}.{key}" if where != "body" else str(key), depth + 1))
            pending.extend(reversed(children))  # first field first, as a reader would
        elif isinstance(item, list):
            pending.extend(reversed([(child, f"{where}[{i}]", depth + 1) for i, child in enumerate(item)]))


def refuse_unknown(body: dict, allowed, why: str, prefix: str = "") -> None:
    """Invalid naming the first field that is not one of `allowed`."""
    unknown = set(body) - set(allowed)
    if unknown:
        raise Invalid.field(prefix + sorted(unknown)[0], why)


def string_field(body: dict, name: str, *, required: bool, max_length: int, default: str = "",
                 label: str = "") -> str:
    value = body.get(name)
    label = label or name
    if value is None:
        if required:
            raise Invalid.field(label, "is required")
        return default
    if not isinstance(value, str):
        raise Invalid.field(label, "must be a string")
    value = value.strip()
    if required and not value:
        raise Invalid.field(label, "must not be empty")
    if len(value) > max_length:
        raise Invalid.field(label, f"must be at most {max_length} characters")
    return value


def int_field(value: Any, name: str, bounds: limits.Range, *, default=None, whole_floats: bool = False) -> int:
    """An integer within bounds (a query-string digit string counts). whole_floats
    accepts 2.0 for 2: JSON-schema "number" parameters that LLMs fill in."""
    if value is None:
        return int(bounds.default if default is None else default)
    if isinstance(value, str) and value.strip().lstrip("-").isdecimal():  # not isdigit: int("²") fails
        if len(value.strip().lstrip("-")) > INT_MAX_DIGITS:  # int() refuses 4,300 digits with a ValueError
            raise Invalid.field(name, f"must be {bounds.describe()}")
        value = int(value)
    if whole_floats and isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise Invalid.field(name, "must be an integer")
    if not bounds.low <= value <= bounds.high:
        raise Invalid.field(name, f"must be {bounds.describe()}")
    return value


def number_field(value: Any, name: str, bounds: limits.Range, *, default=None) -> float:
    if value is None:
        return float(bounds.default if default is None else default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Invalid.field(name, "must be a number")
    if not bounds.low <= value <= bounds.high:
        raise Invalid.field(name, f"must be {bounds.describe()}")
    return float(value)


def choice_field(body: dict, name: str, options, default: str) -> str:
    value = body.get(name, default)
    if value not in options:
        raise Invalid.field(name, f"must be one of {', '.join(options)}")
    return value


def string_list(value: Any, name: str, max_items: int = limits.FILTER_LIST_MAX) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value) or len(value) > max_items:
        raise Invalid.field(name, f"must be a list of up to {max_items} non-empty strings")
    return value


def name_and_description_changes(body: dict) -> dict:
    """The `name` and `description` a PATCH body carries, validated as at creation."""
    changes = {}
    if "name" in body:
        changes["name"] = string_field(body, "name", required=True, max_length=limits.NAME_MAX_CHARS)
    if "description" in body:
        changes["description"] = string_field(body, "description", required=False,
                                               max_length=limits.DESCRIPTION_MAX_CHARS)
    return changes


def camel_case(name: str) -> str:
    """snake_case → camelCase, the API's and the state machine's JSON field names."""
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def bool_field(body: dict, name: str, default: bool = False) -> bool:
    value = body.get(name, default)
    if not isinstance(value, bool):
        raise Invalid.field(name, "must be true or false")
    return value


def timestamp_field(value: Any, name: str) -> Optional[datetime]:
    """An ISO 8601 time with a zone (2026-11-22T10:00:00Z) or a date (UTC midnight)."""
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00")) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    if parsed is None:
        raise Invalid.field(name, "must be an ISO 8601 time such as 2026-11-22T10:00:00Z")
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)
