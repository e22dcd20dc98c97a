"""Routes for what agents learn: knowledge extracted from conversations."""
from chalice import Blueprint

from chalicelib import limits
from chalicelib.api.http import authenticated, json_body, ok
from chalicelib.api.views import extraction_view
from chalicelib.knowledge import extract, jobs, parse_conversation

blueprint = Blueprint(__name__)


@blueprint.route("/agents/{agent_id}/knowledge/extract", methods=["POST"])
@authenticated(blueprint)
def extract_knowledge(principal, agent_id):
    conversation = parse_conversation(json_body(blueprint.current_request))
    if conversation.chars > limits.EXTRACT_SYNC_MAX_CHARS:
        return ok(jobs.job_view(jobs.start(principal, agent_id, conversation)), status=202)
    return ok(extraction_view(extract(principal, agent_id, conversation)))


@blueprint.route("/agents/{agent_id}/knowledge/extract/{job_id}", methods=["GET"])
@authenticated(blueprint)
def extraction_job(principal, agent_id, job_id):
    return ok(jobs.job_view(jobs.get(principal, agent_id, job_id)))
