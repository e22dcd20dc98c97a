"""An upload registered through the API whose bytes never come expires once its URL has
(settings.upload_url_seconds, plus reconcile.REGISTRATION_GRACE_SECONDS), unless its object
is in the bucket; a PUT that lands after the expiry still gets its document ingested.
Against the real database and the emulator's S3 and Step Functions (a one-state machine of
the test's own stands in for the pipeline, so the runs started here end at once)."""
import json
import secrets
import urllib.request
from urllib.parse import parse_qs, urlsplit

import pytest

from chalicelib.config import load_settings
from chalicelib.documents import reconcile, trigger, uploads
from chalicelib.storage import connection, documents

URL_SECONDS = 120


@pytest.fixture
def emulator(service_env, local_env, monkeypatch):
    from chalicelib import aws

    for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "KB_BUCKET"):
        monkeypatch.setenv(name, local_env[name])
    monkeypatch.setenv("UPLOAD_URL_SECONDS", str(URL_SECONDS))
    aws.client.cache_clear()
    sfn = aws.client("stepfunctions")
    machine = sfn.create_state_machine(
        name=f"it-registrations-{secrets.token_hex(4)}", roleArn="arn:aws:iam::000000000000:role/it",
        definition=json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}}))
    monkeypatch.setenv("STATE_MACHINE_ARN", machine["stateMachineArn"])
    keys = []
    yield keys
    s3 = aws.client("s3")
    for key in keys:
        s3.delete_object(Bucket=local_env["KB_BUCKET"], Key=key)
    sfn.delete_state_machine(stateMachineArn=machine["stateMachineArn"])
    aws.client.cache_clear()


@pytest.fixture
def kb(tenant, emulator):
    from chalicelib.knowledge_bases import create_knowledge_base

    principal, _ = tenant
    return principal, create_knowledge_base(principal, name="Registrations", description="")["id"]


def _register(kb, name: str) -> uploads.Upload:
    principal, kb_id = kb
    return uploads.upload(principal, kb_id, uploads.UploadRequest(path=name, content_type="text/plain",
                                                                   size=len(_body(name)), metadata={}))


def _body(name: str) -> bytes:
    return f"The file {name} tells of the harbour's tides.".encode()


def _put(registered: uploads.Upload, name: str, keys: list) -> None:
    request = urllib.request.Request(registered.put.url, data=_body(name), method="PUT",
                                     headers={"Content-Type": registered.put.content_type})
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert answer.status == 200
    keys.append(registered.document["s3_key"])


def _age(doc_id: str, seconds: int) -> None:
    """As if registered `seconds` ago."""
    with connection() as conn:
        conn.execute("UPDATE documents SET updated_at = now() - make_interval(secs => %s) WHERE id = %s",
                     (seconds, doc_id))


def _row(doc_id: str) -> dict:
    with connection() as conn:
        return documents.get(conn, doc_id)


def test_the_upload_url_lives_as_long_as_the_setting_says(kb):
    registered = _register(kb, "lifetime.txt")
    assert registered.put.expires_in == URL_SECONDS
    assert parse_qs(urlsplit(registered.put.url).query)["X-Amz-Expires"] == [str(URL_SECONDS)]


def test_a_registration_whose_bytes_never_came_expires_once_its_url_has(kb):
    past = _register(kb, "never-sent.txt").document["id"]
    within = _register(kb, "still-good.txt").document["id"]
    _age(past, URL_SECONDS + reconcile.REGISTRATION_GRACE_SECONDS + 1)
    _age(within, URL_SECONDS - 5)  # its URL is still good
    expired = reconcile.reconcile({"only": ["expired"]})["expired"]
    assert past in expired and within not in expired
    assert (_row(past)["status"], _row(past)["error_code"]) == ("FAILED", "UPLOAD_EXPIRED")
    assert (_row(within)["status"], _row(within)["error_code"]) == ("PENDING", None)


def test_a_registration_whose_object_is_in_the_bucket_is_started_not_expired(kb, emulator):
    registered = _register(kb, "event-lost.txt")
    _put(registered, "event-lost.txt", emulator)  # its S3 event goes to the stack's own trigger, not here
    doc_id = registered.document["id"]
    _age(doc_id, URL_SECONDS + reconcile.REGISTRATION_GRACE_SECONDS + 1)
    assert doc_id not in reconcile.expire_registrations()
    row = _row(doc_id)
    assert (row["status"], row["error_code"]) == ("PENDING", None)
    assert row["current_run_id"] and row["execution_arn"]  # a run, started on the Step Functions of the emulator


def test_a_put_that_lands_after_the_expiry_gets_its_document_ingested(kb, emulator):
    """S3 checks the URL when the PUT starts: one begun before the expiry may land after it."""
    registered = _register(kb, "slow-put.txt")
    doc_id = registered.document["id"]
    _age(doc_id, URL_SECONDS + reconcile.REGISTRATION_GRACE_SECONDS + 1)
    assert doc_id in reconcile.expire_registrations()
    _put(registered, "slow-put.txt", emulator)
    key = registered.document["s3_key"]
    answer = trigger.handle_s3_event({"Records": [{"eventSource": "aws:s3", "eventName": "ObjectCreated:Put", "s3": {
        "bucket": {"name": load_settings().bucket},
        "object": {"key": key, "size": len(_body("slow-put.txt"))}}}]})  # as the trigger gets it
    assert answer["started"] == [doc_id]
    row = _row(doc_id)
    assert (row["status"], row["error_code"]) == ("PENDING", None) and row["execution_arn"]


def test_a_late_created_event_for_an_object_deleted_since_starts_nothing(kb):
    """An ObjectCreated that arrives after its object was deleted (a mirrored copy whose
    original went) must not bring the document back."""
    key = f"kb/{kb[1]}/gone-before-its-event.txt"
    answer = trigger.handle_s3_event({"Records": [{"eventSource": "aws:s3", "eventName": "ObjectCreated:Put", "s3": {
        "bucket": {"name": load_settings().bucket}, "object": {"key": key, "size": 12}}}]})
    assert answer == {"started": [], "deleted": 0, "skipped": 1}
    with connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM documents WHERE s3_key = %s", (key,)).fetchone()["n"] == 0
