"""The API's conventions: JSON envelopes, error codes, bearer-key authentication."""
import functools
import json
import logging
from typing import Any, Callable, Optional

from chalice import Response

from chalicelib.auth import Principal, authenticate, bearer_token

logger = logging.getLogger(__name__)
JSON_HEADERS = {"Content-Type": "application/json"}


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def not_found(what: str, ident: str) -> ApiError:
    return ApiError(404, "NOT_FOUND", f"{what} {ident} was not found")


def invalid(field: str, why: str) -> ApiError:
    return ApiError(400, "INVALID_INPUT", f"{field}: {why}")


def ok(data: Any, status: int = 200) -> Response:
    return Response(body=json.dumps({"success": True, "data": data}, default=str),
                    status_code=status, headers=JSON_HEADERS)


def error_response(status: int, code: str, message: str, details: Any = None) -> Response:
    error = {"code": code, "message": message}
    if details is not None:
        error["details"] = details
    return Response(body=json.dumps({"success": False, "error": error}), status_code=status, headers=JSON_HEADERS)


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
    """Refuse, naming where, any string (key or value) that cannot be stored as text."""
    if isinstance(value, str):
        if _bad_text(value):
            raise invalid(path, "contains a NUL character or invalid Unicode")
    elif isinstance(value, dict):
        for key, item in value.items():
            check_text(key, path)
            check_text(item, f"{path}.{key}" if path != "body" else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            check_text(item, f"{path}[{index}]")


def json_body(request) -> dict:
    raw = request.raw_body or b""
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, "INVALID_JSON", f"the request body is not valid JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise ApiError(400, "INVALID_JSON", "the request body must be a JSON object")
    check_text(body)
    return body


def query_params(request) -> dict:
    params = dict(request.query_params or {})
    for name, value in params.items():
        check_text(value, name)
    return params


def refuse_unknown(body: dict, allowed, why: str, prefix: str = "") -> None:
    """400 naming the first field that is not one of `allowed`."""
    unknown = set(body) - set(allowed)
    if unknown:
        raise invalid(prefix + sorted(unknown)[0], why)


def string_field(body: dict, name: str, *, required: bool, max_length: int, default: str = "") -> str:
    value = body.get(name)
    if value is None:
        if required:
            raise invalid(name, "is required")
        return default
    if not isinstance(value, str):
        raise invalid(name, "must be a string")
    value = value.strip()
    if required and not value:
        raise invalid(name, "must not be empty")
    if len(value) > max_length:
        raise invalid(name, f"must be at most {max_length} characters")
    return value


def name_and_description_changes(body: dict) -> dict:
    """The `name` and `description` a PATCH body carries, validated as at creation."""
    changes = {}
    if "name" in body:
        changes["name"] = string_field(body, "name", required=True, max_length=200)
    if "description" in body:
        changes["description"] = string_field(body, "description", required=False, max_length=2000)
    return changes


def int_field(value: Any, name: str, *, low: int, high: int, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid(name, "must be an integer")
    if not low <= value <= high:
        raise invalid(name, f"must be between {low} and {high}")
    return value


def authenticated(blueprint) -> Callable:
    """Route decorator: resolves the bearer key to a Principal (401 otherwise),
    passes it as the first argument, and turns ApiError into the error envelope."""
    def decorate(view: Callable) -> Callable:
        @functools.wraps(view)
        def wrapper(*args, **kwargs):
            try:
                request = blueprint.current_request
                principal = _principal(request.headers.get("authorization"))
                return view(principal, *args, **kwargs)
            except ApiError as err:
                return error_response(err.status, err.code, err.message)
            except Exception:
                logger.exception("unhandled error")
                return error_response(500, "INTERNAL_ERROR", "an internal error occurred")
        return wrapper
    return decorate


def _principal(authorization: Optional[str]) -> Principal:
    token = bearer_token(authorization)
    if token is None:
        raise ApiError(401, "UNAUTHORIZED", "send an API key as 'Authorization: Bearer <key>'")
    principal = authenticate(token)
    if principal is None:
        raise ApiError(401, "UNAUTHORIZED", "the API key is not valid")
    return principal
