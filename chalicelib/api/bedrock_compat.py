"""Amazon Bedrock's Retrieve and RetrieveAndGenerate routes (bedrock-agent-runtime), for a
boto3 client with endpoint_url set to KB_API_URL that sends the product's key as a bearer
token (README: Coming from Bedrock). Thin: the mapping is chalicelib/compat/bedrock.py;
errors carry x-amzn-ErrorType, so boto3 raises its own exception classes."""
import json
import re
from urllib.parse import unquote

from chalice import Blueprint, Response

from chalicelib import errors
from chalicelib.api.http import JSON_HEADERS, authenticated, json_body, status_of
from chalicelib.compat import bedrock, schemas

blueprint = Blueprint(__name__)
PREFIXES = ("/knowledgebases/", "/retrieveAndGenerate")
SIGV4 = "AWS4-HMAC-SHA256"
# boto3 sends a knowledge-base ARN's ":" and "/" percent-encoded (…%3Aknowledge-base%2Fkb_…); a gateway
# that decodes the "/" before routing (the emulator's does) splits the id in two, and the request
# reaches the catch-all route (edge.py), which hands a path like this one to retrieve().
ARN_RETRIEVE = re.compile(r"/knowledgebases/(arn:[^/]+/[^/]+)/retrieve")


def error_response(err: errors.ServiceError) -> Response:
    if isinstance(err, errors.Unauthorized) and _signed_request():
        err = errors.Unauthorized("this service does not verify SigV4 signatures: send the API key as"
                                  " 'Authorization: Bearer <key>' (a boto3 before-send hook; README: Coming from"
                                  " Bedrock)")
    status = 501 if isinstance(err, bedrock.NotImplementedHere) else status_of(err)
    status, kind, body = bedrock.error_shape(err, status)
    headers = {**JSON_HEADERS, "x-amzn-ErrorType": kind}
    if getattr(err, "retry_after", None) is not None:
        headers["Retry-After"] = str(err.retry_after)
    return Response(body=json.dumps(body), status_code=status, headers=headers)


def _signed_request() -> bool:
    try:
        request = blueprint.current_request
    except Exception:  # not inside a request (the edge shapes an unrouted one)
        return False
    return (request.headers.get("authorization") or "").startswith(SIGV4)


def _body(operation: str) -> dict:
    """The JSON body, its types checked against docs/openapi.yaml's schema of the operation."""
    return schemas.check(operation, json_body(blueprint.current_request))


def answer(data: dict) -> Response:
    return Response(body=json.dumps(data, default=str), status_code=200, headers=dict(JSON_HEADERS))


@blueprint.route("/knowledgebases/{knowledge_base_id}/retrieve", methods=["POST"])
@authenticated(blueprint, respond=error_response)
def retrieve(principal, knowledge_base_id):
    # unquote: a gateway that keeps an encoded "/" in one path segment may pass the id on still encoded
    return answer(bedrock.retrieve(principal, unquote(knowledge_base_id), _body("retrieve")))


@blueprint.route("/retrieveAndGenerate", methods=["POST"])
@authenticated(blueprint, respond=error_response)
def retrieve_and_generate(principal):
    return answer(bedrock.retrieve_and_generate(principal, _body("retrieveAndGenerate")))
