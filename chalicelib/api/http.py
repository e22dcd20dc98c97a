"""The API's conventions: JSON envelopes, the status of each kind of error,
bearer-key authentication and the per-key rate limit."""
import functools
import json
import logging
from typing import Any, Callable, Optional, Sequence

from chalice import Response

from chalicelib import errors, kv, limits
from chalicelib.auth import Principal, bearer_token, keys, throttle
from chalicelib.storage import acting_for
from chalicelib.validate import check_text

logger = logging.getLogger(__name__)
JSON_HEADERS = {"Content-Type": "application/json"}

# Each kind of service error and its HTTP status: the one place statuses are decided.
STATUS: dict[type, int] = {
    errors.Invalid: 400,
    errors.Unauthorized: 401,
    errors.Forbidden: 403,
    errors.NotFound: 404,
    errors.MethodNotAllowed: 405,
    errors.Conflict: 409,
    errors.TooLarge: 413,
    errors.Unsupported: 415,
    errors.Throttled: 429,
    errors.BadUpstream: 502,
    errors.Unavailable: 503,
}


def status_of(err: errors.ServiceError) -> int:
    return next((STATUS[kind] for kind in type(err).__mro__ if kind in STATUS), 500)


def error_body(err: errors.ServiceError) -> dict:
    """The error envelope's `error` object."""
    error = {"code": err.code, "message": err.message}
    if err.details is not None:
        error["details"] = err.details
    return error


def ok(data: Any, status: int = 200) -> Response:
    return Response(body=json.dumps({"success": True, "data": data}, default=str),
                    status_code=status, headers=dict(JSON_HEADERS))


def error_response(err: errors.ServiceError) -> Response:
    headers = dict(JSON_HEADERS)
    if getattr(err, "retry_after", None) is not None:  # 429, and a 503 that knows when
        headers["Retry-After"] = str(err.retry_after)
    return Response(body=json.dumps({"success": False, "error": error_body(err)}),
                    status_code=status_of(err), headers=headers)


def _not_json(constant: str):
    raise ValueError(f"{constant} is not a JSON value")


def json_body(request) -> dict:
    raw = request.raw_body or b""
    if len(raw) > limits.BODY_MAX_BYTES:
        raise errors.TooLarge(f"the request body has {len(raw)} bytes; the limit is {limits.BODY_MAX_BYTES}",
                              code="BODY_TOO_LARGE")
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw, parse_constant=_not_json)
    except (ValueError, UnicodeDecodeError) as exc:
        raise errors.Invalid(f"the request body is not valid JSON: {exc}", code="INVALID_JSON") from exc
    except RecursionError:
        raise errors.Invalid(f"the request body nests deeper than {limits.JSON_MAX_DEPTH} levels",
                             code="INVALID_JSON") from None
    if not isinstance(body, dict):
        raise errors.Invalid("the request body must be a JSON object", code="INVALID_JSON")
    check_text(body)
    return body


def query_params(request) -> dict:
    params = dict(request.query_params or {})
    for name, value in params.items():
        check_text(value, name)
    return params


# What a view will read from Redis, worked out from its request before it runs (the caller as
# this worker remembers it, the request, the path's parameters): read in the request's one
# Redis round trip (kv.read_ahead).
ReadsAhead = Callable[[Principal, Any, dict], Sequence[str]]


def authenticated(blueprint, respond: Callable[[errors.ServiceError], Response] = error_response,
                  reads: Optional[ReadsAhead] = None) -> Callable:
    """Route decorator: resolves the bearer key to a Principal (401 otherwise; 429 once
    an address sent too many bad keys or a key is over its rate), passes it as the first
    argument, and turns a ServiceError into the error envelope (or into what `respond`
    makes of it: the OpenAI and Bedrock routes answer in their APIs' own error shapes).
    `reads`: the Redis keys the view will read, read with the check when the key's caller
    is remembered."""
    def decorate(view: Callable) -> Callable:
        @functools.wraps(view)
        def wrapper(*args, **kwargs):
            try:
                request = blueprint.current_request
                source = ((request.context or {}).get("identity") or {}).get("sourceIp")
                token = bearer_token(request.headers.get("authorization"))
                known = keys.remembered(token)
                # One Redis round trip: bad keys, the keys' generation, the token (a refusal costs
                # no database lookup), what the view will read; the caller remembered under that
                # generation, or looked up.
                checked = throttle.check(token, source, known, _reads_ahead(reads, known, request, kwargs))
                principal = _principal(token, source, checked.keys_generation)
                if not checked.taken:
                    throttle.take(principal, token)
                _check_path(kwargs)
                with acting_for(principal.org_id, principal.user_id), \
                        kv.reading_ahead(checked.ahead, checked.keys_generation):
                    return view(principal, *args, **kwargs)  # what the database lets the request see
            except errors.ServiceError as err:
                if status_of(err) >= 500:
                    logger.warning("answered %s: %s", err.code, err.message)
                return respond(err)
            except Exception:
                logger.exception("unhandled error")
                return respond(errors.ServiceError("an internal error occurred"))
        return wrapper
    return decorate


def _check_path(params: dict) -> None:
    for name, value in params.items():  # path ids reach SQL and Redis keys: no NUL, no broken Unicode
        check_text(value, name)


def _reads_ahead(reads: Optional[ReadsAhead], known: Optional[Principal], request, kwargs: dict) -> Sequence[str]:
    """None read ahead for a caller not remembered, a large body, or a request the view will
    refuse anyway."""
    if reads is None or known is None or len(request.raw_body or b"") > limits.READ_AHEAD_BODY_MAX_BYTES:
        return ()
    try:
        _check_path(kwargs)
        return reads(known, request, kwargs)
    except errors.ServiceError:
        return ()


def _principal(token, source, keys_generation) -> Principal:
    if token is None:
        raise errors.Unauthorized("send an API key as 'Authorization: Bearer <key>'")
    principal = keys.authenticate(token, keys_generation)
    if principal is None:
        throttle.count_bad_key(source)
        raise errors.Unauthorized("the API key is not valid (unknown, revoked or expired)")
    return principal
