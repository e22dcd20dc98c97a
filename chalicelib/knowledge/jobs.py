"""Long conversations are extracted after the request answered: the API stores a job
and invokes the knowledge_extract function asynchronously (EXTRACT_FUNCTION_NAME);
the caller polls GET /agents/{agentId}/knowledge/extract/{jobId}."""
import json
import logging
import os

from botocore.exceptions import BotoCoreError, ClientError

from chalicelib.auth import Principal
from chalicelib.errors import NotFound, ServiceError, Transient, Unavailable
from chalicelib.ids import new_id
from chalicelib.knowledge.extract import Conversation, check_access, extract, parse_conversation
from chalicelib.llm import chat_model
from chalicelib.storage import acting_for, connection
from chalicelib.storage import extraction_jobs as job_rows

logger = logging.getLogger(__name__)


def start(principal: Principal, agent_id: str, conversation: Conversation) -> dict:
    """Checks what it can before answering (access, a model configured), then the job."""
    check_access(principal, agent_id, conversation.knowledge_base_id)
    chat_model()
    jobs_function()
    with connection() as conn:
        job = job_rows.insert(conn, principal, job_id=new_id("job"), agent_id=agent_id,
                              request=conversation.as_json())
    try:
        invoke_later({"jobId": job["id"], "orgId": principal.org_id})
    except Transient:
        with connection() as conn:
            job_rows.finish(conn, job["id"], error={"code": "NOT_STARTED", "message": "the invocation failed"})
        raise
    return job


def jobs_function() -> str:
    """The function that runs work after the request answered (app.py knowledge_extract:
    extractions and knowledge-base rebuilds)."""
    function = os.environ.get("EXTRACT_FUNCTION_NAME")
    if not function:
        raise Unavailable("work after the request is run by the knowledge_extract function, which this"
                          " deployment does not name (EXTRACT_FUNCTION_NAME)", code="EXTRACTION_UNAVAILABLE")
    return function


def invoke_later(payload: dict) -> None:
    """An asynchronous invocation of the jobs function; Transient when it could not be made."""
    from chalicelib.aws import client
    try:
        client("lambda").invoke(FunctionName=jobs_function(), InvocationType="Event",
                                Payload=json.dumps(payload).encode())
    except (BotoCoreError, ClientError) as err:
        logger.warning("could not invoke the jobs function: %s", type(err).__name__)
        raise Transient("the work could not be started; retry") from None


def get(principal: Principal, agent_id: str, job_id: str) -> dict:
    with connection() as conn:
        job = job_rows.get(conn, principal, agent_id, job_id)
    if job is None:
        raise NotFound.thing("extraction job", job_id)
    return job


def run(event: dict) -> dict:
    """The knowledge_extract function: one job, for the organisation that asked. A job
    that is not PENDING (a repeated invocation) is left alone. Failures end in the job.
    A rebuild's fan-out comes the same way (knowledge_bases/rebuild.py)."""
    if "rebuildId" in event:
        from chalicelib.knowledge_bases import rebuild
        return rebuild.run(event)
    org_id, job_id = event.get("orgId"), event.get("jobId")
    if not isinstance(org_id, str) or not isinstance(job_id, str):
        return {"ran": False, "reason": "orgId and jobId are required"}
    from chalicelib.api.views import extraction_view

    with acting_for(org_id):
        with connection() as conn:
            job = job_rows.claim(conn, job_id)
        if job is None:
            return {"ran": False, "reason": f"job {job_id} is not pending"}
        principal = Principal(user_id=job["user_id"], org_id=job["org_id"], role=job["role"])
        try:
            conversation = parse_conversation(job["request"])
            with acting_for(org_id, principal.user_id):  # the entries the job's user may read
                result, error = extraction_view(extract(principal, job["agent_id"], conversation, job_id=job_id)), None
        except ServiceError as err:
            result, error = None, {"code": err.code, "message": err.message}
        except Exception as err:  # noqa: BLE001 - a defect ends the job, which the caller polls
            logger.exception("extraction job %s failed", job_id)
            result, error = None, {"code": "INTERNAL_ERROR", "message": type(err).__name__}
        with connection() as conn:
            job_rows.finish(conn, job_id, result=result, error=error)
    return {"ran": True, "jobId": job_id, "status": "FAILED" if error else "SUCCEEDED"}


def job_view(job: dict) -> dict:
    return {"jobId": job["id"], "agentId": job["agent_id"], "status": job["status"],
            "statusUrl": f"/agents/{job['agent_id']}/knowledge/extract/{job['id']}",
            "result": job["result"], "error": job["error"],
            "createdAt": job["created_at"].isoformat(), "updatedAt": job["updated_at"].isoformat()}
