"""kb_search: the Lambda that agent runtimes invoke directly.

IAM decides who may invoke it at all; the apiKey in the payload names the tenant,
and answers use the same envelope as the HTTP API."""
import logging

from chalicelib.agents import ToolError, invoke_tool
from chalicelib.api.http import ApiError, check_text
from chalicelib.api.search import parse_search_request, run_search
from chalicelib.auth import authenticate

logger = logging.getLogger(__name__)


def handle_kb_search(event: dict) -> dict:
    try:
        if not isinstance(event, dict):
            raise ApiError(400, "INVALID_INPUT", "the payload must be a JSON object")
        check_text(event)
        principal = authenticate(event.get("apiKey"))
        if principal is None:
            raise ApiError(401, "UNAUTHORIZED", "apiKey is missing or not valid")
        if "agentId" in event or "toolId" in event:
            return _invoke_agent_tool(principal, event)
        kb_id = event.get("knowledgeBaseId")
        if not isinstance(kb_id, str) or not kb_id:
            raise ApiError(400, "INVALID_INPUT", "knowledgeBaseId: is required")
        return {"success": True, "data": run_search(principal, parse_search_request([kb_id], event))}
    except ApiError as err:
        return {"success": False, "error": {"code": err.code, "message": err.message,
                                            "status": err.status}}


def _invoke_agent_tool(principal, event: dict) -> dict:
    """{agentId, toolId, arguments, apiKey}: the tool result, as the invoke endpoint answers it."""
    for field in ("agentId", "toolId"):
        if not isinstance(event.get(field), str) or not event[field]:
            raise ApiError(400, "INVALID_INPUT", f"{field}: is required")
    try:
        return invoke_tool(principal, event["agentId"], event["toolId"], event.get("arguments", {}))
    except ToolError as err:
        raise ApiError(err.status, err.code, err.message) from None
