"""kb_search: the Lambda that agent runtimes invoke directly.

IAM decides who may invoke it at all; the apiKey in the payload names the tenant,
and answers use the same envelope as the HTTP API, with the status it would have."""
import logging

from chalicelib.agents import invoke_tool
from chalicelib.api.http import error_body, status_of
from chalicelib.api.views import search_view, tool_result_view
from chalicelib.auth import keys, throttle
from chalicelib.errors import Invalid, ServiceError, Unauthorized
from chalicelib.retrieval import parse_search_request, search
from chalicelib.storage import acting_for
from chalicelib.validate import check_text

logger = logging.getLogger(__name__)


def handle_kb_search(event: dict) -> dict:
    try:
        if not isinstance(event, dict):
            raise Invalid("the payload must be a JSON object")
        check_text(event)
        token = event.get("apiKey") if isinstance(event.get("apiKey"), str) else None
        checked = throttle.check(token, None, keys.remembered(token))  # as the API's (api/http.py)
        principal = keys.authenticate(token, checked.keys_generation)
        if principal is None:
            raise Unauthorized("apiKey is missing or not valid")
        if not checked.taken:
            throttle.take(principal, token)
        with acting_for(principal.org_id, principal.user_id):
            return _answer(principal, event)
    except ServiceError as err:
        return _error(err)
    except Exception:  # an answer, not a crash, and nothing internal in it
        logger.exception("unhandled error")
        return _error(ServiceError("an internal error occurred"))


def _answer(principal, event: dict) -> dict:
    if "agentId" in event or "toolId" in event:
        return _invoke_agent_tool(principal, event)
    kb_id = event.get("knowledgeBaseId")
    if not isinstance(kb_id, str) or not kb_id:
        raise Invalid.field("knowledgeBaseId", "is required")
    request = parse_search_request([kb_id], event, extra_fields=("apiKey", "knowledgeBaseId"))
    return {"success": True, "data": search_view(search(principal, request))}


def _error(err: ServiceError) -> dict:
    return {"success": False, "error": {**error_body(err), "status": status_of(err)}}


def _invoke_agent_tool(principal, event: dict) -> dict:
    """{agentId, toolId, arguments, apiKey}: the tool result, as the invoke endpoint answers it."""
    for field in ("agentId", "toolId"):
        if not isinstance(event.get(field), str) or not event[field]:
            raise Invalid.field(field, "is required")
    return tool_result_view(invoke_tool(principal, event["agentId"], event["toolId"], event.get("arguments", {})))
