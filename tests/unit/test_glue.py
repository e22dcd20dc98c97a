"""Pure pieces of the AWS glue: S3 keys, Step Functions errors, bearer tokens."""
import json

from chalicelib.auth import bearer_token
from chalicelib.ingestion.errors import IngestionError
from chalicelib.ingestion.objects import decoded_key, parse_document_key
from chalicelib.ingestion.steps import failure_from_error, run_cut_short


def test_document_keys_name_their_knowledge_base():
    assert parse_document_key("kb/kb_abc123/reports/q1.pdf") == ("kb_abc123", "reports/q1.pdf")
    assert parse_document_key("kb/kb_abc123/") is None
    assert parse_document_key("_pipeline/doc_1/run/x.json") is None
    assert parse_document_key("kb/not-a-kb/x.txt") is None


def test_event_keys_are_url_decoded():
    assert decoded_key("kb/kb_1/my+file%C3%A9.txt") == "kb/kb_1/my fileé.txt"


def test_ingestion_errors_keep_their_code_through_step_functions():
    err = IngestionError("ENCRYPTED", "the PDF needs a password")
    cause = json.dumps({"errorType": "IngestionError", "errorMessage": str(err)})
    assert failure_from_error({"Error": "IngestionError", "Cause": cause}) == (
        "ENCRYPTED", "the PDF needs a password")


def test_other_errors_become_internal_errors_with_their_name():
    code, message = failure_from_error({"Error": "KeyError", "Cause": '{"errorMessage": "x"}'})
    assert code == "INTERNAL_ERROR" and message.startswith("KeyError")
    assert failure_from_error({"Error": "States.Timeout", "Cause": ""})[0] == "TIMEOUT"


def test_bearer_tokens():
    assert bearer_token("Bearer abc") == "abc"
    assert bearer_token("bearer   abc ") == "abc"
    assert bearer_token("Basic abc") is None
    assert bearer_token("Bearer ") is None
    assert bearer_token(None) is None


def test_ingestion_errors_keep_their_code_when_the_runtime_renames_the_error():
    err = IngestionError("UNSUPPORTED_TYPE", "logo.png: binary content")
    cause = json.dumps({"errorType": "Runtime.HandlerError", "errorMessage": str(err)})
    assert failure_from_error({"Error": "Runtime.HandlerError", "Cause": cause}) == (
        "UNSUPPORTED_TYPE", "logo.png: binary content")


def test_each_error_kind_has_its_status_and_an_unknown_kind_is_a_500():
    from chalicelib import errors
    from chalicelib.api.http import error_body, status_of
    from chalicelib.ingestion.errors import IngestionError

    expected = {errors.Invalid: 400, errors.Unauthorized: 401, errors.Forbidden: 403, errors.NotFound: 404,
                errors.MethodNotAllowed: 405, errors.Conflict: 409, errors.TooLarge: 413, errors.Unsupported: 415,
                errors.Throttled: 429, errors.Unavailable: 503, errors.Transient: 503, errors.ServiceError: 500,
                IngestionError: 500}
    for kind, status in expected.items():
        if kind is IngestionError:
            err = kind("CODE", "message")
        elif kind is errors.Throttled:
            err = kind("message", retry_after=3)
        else:
            err = kind("message")
        assert status_of(err) == status, kind
    assert error_body(errors.Invalid.field("topK", "must be an integer", code="INVALID_ARGUMENTS")) == {
        "code": "INVALID_ARGUMENTS", "message": "topK: must be an integer"}
    assert error_body(errors.NotFound.thing("knowledge base", "kb_1"))["message"] == "knowledge base kb_1 was not found"


def test_a_worker_that_went_away_cuts_the_run_short_and_decides_nothing():
    """What ministack answered when `make down` stopped it under five runs (issue 33): Finalize's
    new worker could not start, and MarkFailed made a stored document FAILED INTERNAL_ERROR."""
    def caught(name, message):
        return {"Error": name, "Cause": json.dumps({"errorMessage": message, "errorType": name})}

    for error in (caught("RuntimeError", "Worker process exited immediately. stderr: "),
                  caught("Runtime.HandlerError", "Worker process died"),
                  caught("BrokenPipeError", "[Errno 32] Broken pipe"),
                  caught("Runtime.ExitError", "Runtime exited with error: signal: killed"),
                  caught("Lambda.ServiceException", "Lambda is unavailable")):
        assert run_cut_short(error).startswith(error["Error"]), error
    for error in (caught("Runtime.HandlerError", "KeyError: 'pages'"), caught("RuntimeError", "a defect"),
                  {"Error": "States.Timeout", "Cause": ""},
                  caught("Runtime.HandlerError", json.dumps({"code": "ENCRYPTED", "message": "x"}))):
        assert run_cut_short(error) is None, error
