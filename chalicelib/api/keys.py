"""Routes for API keys and the organisation's audit log."""
from chalice import Blueprint

from chalicelib import limits
from chalicelib.api.http import authenticated, json_body, ok, query_params
from chalicelib.api.views import audit_view, key_view
from chalicelib.audit import AuditQuery, audit_log
from chalicelib.auth import keys
from chalicelib.errors import Invalid
from chalicelib.validate import INT_MAX_DIGITS, int_field, refuse_unknown, string_field, timestamp_field

blueprint = Blueprint(__name__)


def _flag(value, name: str) -> bool:
    if value in (None, "false", "0"):
        return False
    if value in ("true", "1"):
        return True
    raise Invalid.field(name, "must be true or false")


@blueprint.route("/api-keys", methods=["GET"])
@authenticated(blueprint)
def list_keys(principal):
    """The caller's keys; ?all=true gives an admin the organisation's."""
    whole = _flag(query_params(blueprint.current_request).get("all"), "all")
    return ok({"items": [key_view(r) for r in keys.list_keys(principal, whole_organization=whole)]})


@blueprint.route("/api-keys", methods=["POST"])
@authenticated(blueprint)
def create_key(principal):
    body = json_body(blueprint.current_request)
    refuse_unknown(body, {"name", "expiresInDays"}, "is not a field of a new key; use name and expiresInDays")
    days = body.get("expiresInDays")
    new = keys.create_key(
        principal, name=string_field(body, "name", required=True, max_length=limits.KEY_NAME_MAX_CHARS),
        expires_in_days=None if days is None else int_field(days, "expiresInDays", limits.KEY_EXPIRY_DAYS))
    return ok({**key_view(new.row), "key": new.key}, status=201)


@blueprint.route("/api-keys/{key_id}", methods=["DELETE"])
@authenticated(blueprint)
def revoke_key(principal, key_id):
    return ok(key_view(keys.revoke_key(principal, key_id)))


@blueprint.route("/api-keys/{key_id}/rotate", methods=["POST"])
@authenticated(blueprint)
def rotate_key(principal, key_id):
    new = keys.rotate_key(principal, key_id)
    return ok({**key_view(new.row), "key": new.key}, status=201)


@blueprint.route("/audit-log", methods=["GET"])
@authenticated(blueprint)
def organisation_audit_log(principal):
    params = query_params(blueprint.current_request)
    refuse_unknown(params, {"targetType", "targetId", "userId", "since", "until", "limit", "nextToken"},
                   "is not a filter of the audit log")
    token = params.get("nextToken")
    if token is not None and not (token.isdecimal() and len(token) <= INT_MAX_DIGITS):
        raise Invalid.field("nextToken", "is not a token this endpoint gave")
    query = AuditQuery(
        target_type=params.get("targetType"), target_id=params.get("targetId"), user_id=params.get("userId"),
        since=timestamp_field(params.get("since"), "since"), until=timestamp_field(params.get("until"), "until"),
        limit=int_field(params.get("limit"), "limit", limits.AUDIT_PAGE_SIZE),
        before_id=int(token) if token is not None else None)
    rows, next_token = audit_log(principal, query)
    return ok({"items": [audit_view(r) for r in rows], "nextToken": next_token})
