"""Routes for knowledge bases, their documents and search."""
from chalice import Blueprint

from chalicelib import knowledge_bases as kbs
from chalicelib.api.http import (ApiError, authenticated, int_field, invalid, json_body,
                                 name_and_description_changes, not_found, ok, query_params,
                                 refuse_unknown, string_field)

blueprint = Blueprint(__name__)
VISIBILITIES = ("private", "org", "public")


@blueprint.route("/knowledge-bases", methods=["POST"])
@authenticated(blueprint)
def create_knowledge_base(principal):
    body = json_body(blueprint.current_request)
    visibility = string_field(body, "visibility", required=False, max_length=10, default="private")
    if visibility not in VISIBILITIES:
        raise invalid("visibility", f"must be one of {', '.join(VISIBILITIES)}")
    embedding = body.get("embedding") or {}
    if not isinstance(embedding, dict):
        raise invalid("embedding", "must be an object {provider, model}")
    chunking = body.get("chunking") or {}
    if not isinstance(chunking, dict):
        raise invalid("chunking", "must be an object {chunkTokens, chunkOverlap}")
    try:
        kb = kbs.create_knowledge_base(
            principal, name=string_field(body, "name", required=True, max_length=200),
            description=string_field(body, "description", required=False, max_length=2000),
            visibility=visibility,
            provider=string_field(embedding, "provider", required=False, max_length=40) or None,
            model=string_field(embedding, "model", required=False, max_length=100) or None,
            chunk_tokens=chunking.get("chunkTokens"), chunk_overlap=chunking.get("chunkOverlap"))
    except ValueError as err:  # the message starts with the field's name
        raise ApiError(400, "INVALID_INPUT", str(err)) from None
    return ok(kb, status=201)


@blueprint.route("/knowledge-bases", methods=["GET"])
@authenticated(blueprint)
def list_knowledge_bases(principal):
    params = query_params(blueprint.current_request)
    limit = int_field(params.get("limit"), "limit", low=1, high=100, default=20)
    return ok(kbs.list_knowledge_bases(principal, limit=limit, after=params.get("nextToken")))


@blueprint.route("/knowledge-bases/{kb_id}", methods=["GET"])
@authenticated(blueprint)
def get_knowledge_base(principal, kb_id):
    kb = kbs.get_knowledge_base(principal, kb_id)
    if kb is None:
        raise not_found("knowledge base", kb_id)
    return ok(kb)


@blueprint.route("/knowledge-bases/{kb_id}", methods=["PATCH"])
@authenticated(blueprint)
def update_knowledge_base(principal, kb_id):
    body = json_body(blueprint.current_request)
    refuse_unknown(body, {"name", "description", "visibility"},
                   "cannot be changed (the embedding model and chunking are fixed at creation)")
    changes = name_and_description_changes(body)
    if "visibility" in body:
        changes["visibility"] = string_field(body, "visibility", required=True, max_length=10)
        if changes["visibility"] not in VISIBILITIES:
            raise invalid("visibility", f"must be one of {', '.join(VISIBILITIES)}")
    kb = kbs.update_knowledge_base(principal, kb_id, changes)
    if kb is None:
        raise not_found("knowledge base", kb_id)
    return ok(kb)


@blueprint.route("/knowledge-bases/{kb_id}", methods=["DELETE"])
@authenticated(blueprint)
def delete_knowledge_base(principal, kb_id):
    if not kbs.delete_knowledge_base(principal, kb_id):
        raise not_found("knowledge base", kb_id)
    return ok({"id": kb_id, "deleted": True})


@blueprint.route("/knowledge-bases/{kb_id}/documents", methods=["GET"])
@authenticated(blueprint)
def list_documents(principal, kb_id):
    status = query_params(blueprint.current_request).get("status")
    if status is not None and status not in kbs.DOCUMENT_STATUSES:
        raise invalid("status", f"must be one of {', '.join(kbs.DOCUMENT_STATUSES)}")
    documents = kbs.list_documents(principal, kb_id, status)
    if documents is None:
        raise not_found("knowledge base", kb_id)
    return ok({"items": documents})
