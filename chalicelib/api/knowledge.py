"""Routes for what agents learn: knowledge extracted from conversations."""
from chalice import Blueprint

from chalicelib import limits
from chalicelib.api.http import authenticated, json_body, ok
from chalicelib.api.views import job_view, session_view
from chalicelib.knowledge import extract, jobs, parse_conversation, sessions
from chalicelib.validate import bool_field, refuse_unknown, string_field

blueprint = Blueprint(__name__)


@blueprint.route("/agents/{agent_id}/knowledge/extract", methods=["POST"])
@authenticated(blueprint)
def extract_knowledge(principal, agent_id):
    conversation = parse_conversation(json_body(blueprint.current_request))
    if conversation.chars > limits.EXTRACT_SYNC_MAX_CHARS:
        return ok(job_view(jobs.start(principal, agent_id, conversation)), status=202)
    return ok(extract(principal, agent_id, conversation).as_json())


@blueprint.route("/agents/{agent_id}/knowledge/extract/{job_id}", methods=["GET"])
@authenticated(blueprint)
def extraction_job(principal, agent_id, job_id):
    return ok(job_view(jobs.get(principal, agent_id, job_id)))


@blueprint.route("/agents/{agent_id}/sessions", methods=["POST"])
@authenticated(blueprint)
def open_session(principal, agent_id):
    body = json_body(blueprint.current_request)
    refuse_unknown(body, {"knowledgeBaseId", "messages"}, "is not a field of a session; use knowledgeBaseId, messages")
    session = sessions.open_session(
        principal, agent_id, messages=body.get("messages"),
        knowledge_base_id=string_field(body, "knowledgeBaseId", required=False, max_length=limits.ID_MAX_CHARS) or None)
    return ok(session_view(session), status=201)


@blueprint.route("/agents/{agent_id}/sessions/{session_id}", methods=["GET"])
@authenticated(blueprint)
def get_session(principal, agent_id, session_id):
    return ok(session_view(sessions.get_session(principal, agent_id, session_id)))


@blueprint.route("/agents/{agent_id}/sessions/{session_id}/messages", methods=["POST"])
@authenticated(blueprint)
def add_session_messages(principal, agent_id, session_id):
    body = json_body(blueprint.current_request)
    refuse_unknown(body, {"messages", "role", "content"}, "is not a field here; send messages, or one role and content")
    messages = body["messages"] if "messages" in body else [{k: body.get(k) for k in ("role", "content")}]
    return ok(session_view(sessions.add_messages(principal, agent_id, session_id, messages)))


@blueprint.route("/agents/{agent_id}/sessions/{session_id}/complete", methods=["POST"])
@authenticated(blueprint)
def complete_session(principal, agent_id, session_id):
    body = json_body(blueprint.current_request)
    refuse_unknown(body, {"knowledgeBaseId", "extract"}, "is not a field here; use knowledgeBaseId, extract")
    session, started = sessions.complete_session(
        principal, agent_id, session_id, extract=bool_field(body, "extract", default=True),
        knowledge_base_id=string_field(body, "knowledgeBaseId", required=False, max_length=limits.ID_MAX_CHARS) or None)
    return ok(session_view(session), status=202 if started else 200)
