"""Routes for knowledge bases."""
from chalice import Blueprint

from chalicelib import knowledge_bases as kbs
from chalicelib import limits
from chalicelib.api.http import authenticated, json_body, ok, query_params
from chalicelib.api.views import kb_view, rebuild_view
from chalicelib.knowledge_bases import rebuild
from chalicelib.config import load_settings
from chalicelib.errors import Invalid
from chalicelib.sources import SourceRules, parse_source
from chalicelib.validate import int_field, name_and_description_changes, refuse_unknown, string_field

blueprint = Blueprint(__name__)


def _visibility(body: dict, *, required: bool) -> str:
    value = string_field(body, "visibility", required=required, max_length=10, default="private")
    if value not in kbs.VISIBILITIES:
        raise Invalid.field("visibility", f"must be one of {', '.join(kbs.VISIBILITIES)}")
    return value


def _source(body: dict, principal):
    settings = load_settings()
    return parse_source(body.get("source"), principal.org_id, settings.bucket, SourceRules.of(settings))


@blueprint.route("/knowledge-bases", methods=["POST"])
@authenticated(blueprint)
def create_knowledge_base(principal):
    body = json_body(blueprint.current_request)
    visibility = _visibility(body, required=False)
    embedding = body.get("embedding") or {}
    if not isinstance(embedding, dict):
        raise Invalid.field("embedding", "must be an object {provider, model}")
    kb = kbs.create_knowledge_base(
        principal, name=string_field(body, "name", required=True, max_length=limits.NAME_MAX_CHARS),
        description=string_field(body, "description", required=False, max_length=limits.DESCRIPTION_MAX_CHARS),
        visibility=visibility,
        provider=string_field(embedding, "provider", required=False, max_length=40) or None,
        model=string_field(embedding, "model", required=False, max_length=100) or None,
        chunking=body.get("chunking"), access=kbs.parse_access(body.get("access")), source=_source(body, principal),
        search=kbs.parse_search_settings(body.get("search")))
    return ok(kb_view(kb, principal), status=201)


@blueprint.route("/knowledge-bases", methods=["GET"])
@authenticated(blueprint)
def list_knowledge_bases(principal):
    params = query_params(blueprint.current_request)
    limit = int_field(params.get("limit"), "limit", limits.PAGE_SIZE)
    rows, next_token = kbs.list_knowledge_bases(principal, limit=limit, after=params.get("nextToken"))
    return ok({"items": [kb_view(r, principal) for r in rows], "nextToken": next_token})


@blueprint.route("/knowledge-bases/{kb_id}", methods=["GET"])
@authenticated(blueprint)
def get_knowledge_base(principal, kb_id):
    return ok(kb_view(kbs.get_knowledge_base(principal, kb_id), principal))


@blueprint.route("/knowledge-bases/{kb_id}", methods=["PATCH"])
@authenticated(blueprint)
def update_knowledge_base(principal, kb_id):
    body = json_body(blueprint.current_request)
    refuse_unknown(body, {"name", "description", "visibility", "access", "source", "search"},
                   "cannot be changed (the embedding model and chunking are fixed at creation)")
    changes = name_and_description_changes(body)
    if "visibility" in body:
        changes["visibility"] = _visibility(body, required=True)
    if "access" in body:  # the lists whole: one left out is no longer narrowed
        changes.update(kbs.parse_access(body["access"]))
    if "source" in body:
        source = _source(body, principal)
        changes["source"] = source.as_json() if source else None
    changes.update(kbs.parse_search_settings(body.get("search")))
    return ok(kb_view(kbs.update_knowledge_base(principal, kb_id, changes), principal))


@blueprint.route("/knowledge-bases/{kb_id}", methods=["DELETE"])
@authenticated(blueprint)
def delete_knowledge_base(principal, kb_id):
    kbs.delete_knowledge_base(principal, kb_id)
    return ok({"id": kb_id, "deleted": True})


@blueprint.route("/knowledge-bases/{kb_id}/rebuild", methods=["POST"])
@authenticated(blueprint)
def rebuild_knowledge_base(principal, kb_id):
    """Chunk and embed every document again, optionally with new chunk sizes: 202, and the
    rebuild to follow with GET."""
    body = json_body(blueprint.current_request)
    refuse_unknown(body, {"chunking"}, "is not a field of a rebuild; use chunking {strategy, chunkTokens,"
                                       " chunkOverlap} or {strategy: hierarchical, parentTokens, childTokens}")
    started = rebuild.start_rebuild(principal, kb_id, chunking=kbs.parse_chunking(body.get("chunking")))
    return ok(rebuild_view(started), status=202)


@blueprint.route("/knowledge-bases/{kb_id}/rebuild", methods=["GET"])
@authenticated(blueprint)
def knowledge_base_rebuild(principal, kb_id):
    return ok(rebuild_view(rebuild.get_rebuild(principal, kb_id)))
