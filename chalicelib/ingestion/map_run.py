"""The error behind a failed Embed Map. A distributed Map whose child failed reports only
States.ExceedToleratedFailureThreshold; the child's own Error/Cause (a document's
IngestionError, a worker that went away) is read from its execution, so that MarkFailed
decides as it did when the Map ran its batches inline."""
import psycopg
from aws_lambda_powertools import Logger
from botocore.exceptions import BotoCoreError, ClientError

from chalicelib.aws import client
from chalicelib.storage import connection, documents

logger = Logger(service="kb-service")
MAP_FAILED = "States.ExceedToleratedFailureThreshold"


def child_error(document_id: str, run_id: str, error: dict) -> dict:
    """The first failed child's Error/Cause when error is the Map's own; else error itself
    (also when the child cannot be read: the run's verdict then names the Map's error)."""
    if error.get("Error") != MAP_FAILED:
        return error
    try:
        with connection() as conn:
            doc = documents.get(conn, document_id)
        if doc is None or doc["current_run_id"] != run_id or not doc["execution_arn"]:
            return error
        sfn = client("stepfunctions")
        for run in sfn.list_map_runs(executionArn=doc["execution_arn"])["mapRuns"]:
            failed = sfn.list_executions(mapRunArn=run["mapRunArn"], statusFilter="FAILED",
                                         maxResults=1)["executions"]
            if failed:
                child = sfn.describe_execution(executionArn=failed[0]["executionArn"])
                return {"Error": child.get("error", MAP_FAILED), "Cause": child.get("cause", "")}
    except (BotoCoreError, ClientError, psycopg.Error) as exc:
        logger.warning("could not read the Embed Map's failed child: %s", exc)
    return error
