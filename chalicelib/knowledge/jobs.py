"""Long conversations are extracted after the request answered: the API stores a job and
has the jobs function run it (chalicelib/jobs.py); the caller polls
GET /agents/{agentId}/knowledge/extract/{jobId}."""
import logging

from chalicelib.auth import Principal
from chalicelib.errors import NotFound, ServiceError, Transient
from chalicelib.ids import new_id
from chalicelib.jobs import handles, invoke_later, jobs_function
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


def get(principal: Principal, agent_id: str, job_id: str) -> dict:
    with connection() as conn:
        job = job_rows.get(conn, principal, agent_id, job_id)
    if job is None:
        raise NotFound.thing("extraction job", job_id)
    return job


@handles("jobId")
def run(event: dict) -> dict:
    """The jobs function's part: one job, for the organisation that asked. A job that is not
    PENDING (a repeated invocation) is left alone. Failures end in the job."""
    org_id, job_id = event.get("orgId"), event.get("jobId")
    if not isinstance(org_id, str) or not isinstance(job_id, str):
        return {"ran": False, "reason": "orgId and jobId are required"}
    with acting_for(org_id):
        with connection() as conn:
            job = job_rows.claim(conn, job_id)
        if job is None:
            return {"ran": False, "reason": f"job {job_id} is not pending"}
        principal = Principal(user_id=job["user_id"], org_id=job["org_id"], role=job["role"])
        try:
            conversation = parse_conversation(job["request"])
            with acting_for(org_id, principal.user_id):  # the entries the job's user may read
                result, error = extract(principal, job["agent_id"], conversation, job_id=job_id).as_json(), None
        except ServiceError as err:
            result, error = None, {"code": err.code, "message": err.message}
        except Exception as err:  # noqa: BLE001 - a defect ends the job, which the caller polls
            logger.exception("extraction job %s failed", job_id)
            result, error = None, {"code": "INTERNAL_ERROR", "message": type(err).__name__}
        with connection() as conn:
            job_rows.finish(conn, job_id, result=result, error=error)
    return {"ran": True, "jobId": job_id, "status": "FAILED" if error else "SUCCEEDED"}

