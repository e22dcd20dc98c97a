"""What every HTTP answer shares, whatever route (or none) it reached:
- CORS for the configured origins (CORS_ORIGINS): preflights answered, headers on
  every response;
- the error envelope also for what Chalice answers before a view runs (415 for a body
  that is not JSON, 405) and for paths and methods no route serves (404, 405), through
  a greedy `/{proxy+}` route: API Gateway sends it every request that no resource and
  method pair matches, preflights included;
- Bedrock's Retrieve named by an ARN whose encoded `/` the gateway decoded before routing.
API Gateway's own errors (throttling, a body over 10 MB, timeouts) get the envelope from
the gateway responses in infra/template.yaml."""
import json
import re
from typing import Optional

from chalice import Chalice, Response

from chalicelib import errors
from chalicelib.api.bedrock_compat import (ARN_RETRIEVE, PREFIXES as BEDROCK_PREFIXES, error_response as bedrock_error,
                                           retrieve as bedrock_retrieve)
from chalicelib.api.openai_compat import PREFIX as OPENAI_PREFIX, error_response as openai_error
from chalicelib.api.http import JSON_HEADERS, error_body, error_response
from chalicelib.config import load_settings

ALL_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
ALLOWED_HEADERS = "Authorization,Content-Type"
PREFLIGHT_MAX_AGE = 600
# Chalice's own error bodies ({"Code", "Message"}) and the envelope's codes for them.
_CHALICE_CODES = {"UnsupportedMediaType": errors.Unsupported, "MethodNotAllowedError": errors.MethodNotAllowed,
                  "BadRequest": errors.Invalid}
# Paths that answer another API's errors (OpenAI's, Bedrock's), and what makes them.
ERROR_SHAPES = ((OPENAI_PREFIX, openai_error), *((prefix, bedrock_error) for prefix in BEDROCK_PREFIXES))


def _responder(path: str):
    return next((shape for prefix, shape in ERROR_SHAPES if path.startswith(prefix)), error_response)


def allowed_origin(origin: Optional[str]) -> Optional[str]:
    """The value of Access-Control-Allow-Origin for this Origin, or None."""
    if not origin:  # most callers are not browsers
        return None
    configured = load_settings().cors_origins
    if not configured:
        return None
    if "*" in configured:
        return "*"
    return origin if origin in configured else None


def _cors_headers(origin: Optional[str]) -> dict:
    allowed = allowed_origin(origin)
    if allowed is None:
        return {}
    return {"Access-Control-Allow-Origin": allowed, "Vary": "Origin",
            "Access-Control-Expose-Headers": "Retry-After"}


def _route_patterns(app: Chalice) -> list[tuple[re.Pattern, list[str]]]:
    patterns = []
    for path, methods in app.routes.items():
        if "{proxy+}" in path:
            continue
        regex = "/".join("[^/]+" if part.startswith("{") else re.escape(part) for part in path.split("/"))
        patterns.append((re.compile(f"^{regex}$"), sorted(methods)))
    return patterns


def install(app: Chalice) -> None:
    """The middleware and the catch-all route; call after every blueprint is registered."""
    patterns = _route_patterns(app)

    def methods_of(path: str) -> Optional[list[str]]:
        return next((methods for regex, methods in patterns if regex.match(path)), None)

    @app.route("/{proxy+}", methods=ALL_METHODS)
    def unrouted(**_):
        request = app.current_request
        path = "/" + (request.uri_params or {}).get("proxy", "").strip("/")
        arn = ARN_RETRIEVE.fullmatch(path)
        if arn and request.method == "POST":
            return bedrock_retrieve(knowledge_base_id=arn.group(1))
        methods = methods_of(path)
        respond = _responder(path)
        if request.method == "OPTIONS" and methods is not None:
            return _preflight(request, methods)
        if methods is None:
            return respond(errors.NotFound(f"no endpoint at {path}; see docs/openapi.yaml"))
        response = respond(errors.MethodNotAllowed(
            f"{request.method} is not a method of {path}; it takes {', '.join(methods)}"))
        response.headers["Allow"] = ", ".join(methods)
        return response

    @app.middleware("http")
    def envelope_and_cors(event, get_response):
        response = get_response(event)
        _into_envelope(response, getattr(event, "path", None) or "")
        # a new dict: views may share one headers dict (http.JSON_HEADERS) between responses
        response.headers = {**response.headers, **_cors_headers(_header(event, "origin"))}
        return response


def _header(event, name: str) -> Optional[str]:
    headers = getattr(event, "headers", None) or {}
    return headers.get(name)


def _preflight(request, methods: list[str]) -> Response:
    origin = request.headers.get("origin")
    wanted = (request.headers.get("access-control-request-method") or "").upper()
    if allowed_origin(origin) is None:
        return error_response(errors.Forbidden(f"origin {origin or '(none)'} is not allowed to call this API"
                                               " (CORS_ORIGINS)", code="ORIGIN_NOT_ALLOWED"))
    if wanted and wanted not in methods:
        return error_response(errors.MethodNotAllowed(f"{wanted} is not a method of this path; it takes"
                                                      f" {', '.join(methods)}"))
    return Response(body="", status_code=204, headers={
        "Access-Control-Allow-Methods": ",".join(methods + ["OPTIONS"]),
        "Access-Control-Allow-Headers": ALLOWED_HEADERS, "Access-Control-Max-Age": str(PREFLIGHT_MAX_AGE)})


def _into_envelope(response: Response, path: str = "") -> None:
    """Chalice's {"Code", "Message"} answers (415 for a body that is not JSON, 405) in the envelope
    (or in the error shape of the API the path belongs to)."""
    body = response.body
    if not (isinstance(body, dict) and set(body) == {"Code", "Message"}):
        return
    kind = _CHALICE_CODES.get(body["Code"], errors.ServiceError)
    respond = _responder(path)
    if respond is not error_response:  # its routes say what they take (POST /v1/files: multipart)
        shaped = respond(kind(body["Message"]))
        response.body, response.status_code = shaped.body, shaped.status_code
        response.headers = {**response.headers, **shaped.headers}
        return
    err = kind(body["Message"] + ("; send application/json" if kind is errors.Unsupported else ""))
    response.body = json.dumps({"success": False, "error": error_body(err)})
    response.headers = {**response.headers, **JSON_HEADERS}
