"""The sweep that keeps a document from staying PENDING or PROCESSING after its
execution ended (aborted, timed out, or its MarkFailed step could not reach the
database). Runs on a schedule."""
import logging

from botocore.exceptions import ClientError

from chalicelib.aws import client
from chalicelib.storage import connection, documents

logger = logging.getLogger(__name__)
ENDED = ("SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED")


def reconcile_unfinished_documents(min_age_seconds: int = 60) -> dict:
    sfn = client("stepfunctions")
    fixed = []
    with connection() as conn:
        candidates = documents.unfinished(conn, min_age_seconds)
    for doc in candidates:
        try:
            status = sfn.describe_execution(executionArn=doc["execution_arn"])["status"]
        except ClientError as err:
            if err.response["Error"]["Code"] != "ExecutionDoesNotExist":
                raise
            status = "MISSING"
        if status in ENDED or status == "MISSING":
            with connection() as conn:
                if documents.mark_failed(
                        conn, doc["id"], doc["current_run_id"], "EXECUTION_ENDED",
                        f"the ingestion run ended ({status}) without finishing the document"):
                    fixed.append(doc["id"])
    if fixed:
        logger.warning("marked %d documents whose run had ended as FAILED: %s", len(fixed), fixed)
    return {"checked": len(candidates), "failed": fixed}
