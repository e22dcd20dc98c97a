"""The pipeline steps' shared frame (steps._step) against the real database: the time
each step takes, the log lines' document and run, and which faults become Transient."""
import json
import logging
import time

import psycopg
import pytest

from chalicelib.errors import Transient
from chalicelib.ingestion import steps
from chalicelib.ingestion.model import BatchState
from chalicelib.knowledge_bases import create_knowledge_base
from chalicelib.storage import connection, documents


@pytest.fixture
def pending_doc(tenant):
    principal, _ = tenant
    kb = create_knowledge_base(principal, name="Steps", description="")
    with connection() as conn:
        doc = documents.upsert_pending(conn, kb_id=kb["id"], s3_key=f"kb/{kb['id']}/a.txt", filename="a.txt",
                                       size_bytes=10, run_id="run1")
    return kb, doc


def _batch(kb, doc, run_id="run1") -> BatchState:
    return BatchState(batch_key="k", document_id=doc["id"], kb_id=kb["id"], bucket="b", run_id=run_id)


def _durations(doc_id: str) -> dict:
    with connection() as conn:
        return documents.get(conn, doc_id)["step_durations"]


def test_embed_time_is_the_sum_of_its_batches_and_a_new_run_starts_from_zero(pending_doc):
    kb, doc = pending_doc
    for seconds in (0.15, 0.25):  # two Map iterations of the same run
        with steps._step(_batch(kb, doc), "embed"):
            time.sleep(seconds)
    assert _durations(doc["id"])["embed"] >= 400  # the last batch alone took 250 ms
    with steps._step(_batch(kb, doc, run_id="stale"), "embed"):  # a superseded run adds nothing
        time.sleep(0.05)
    assert 400 <= _durations(doc["id"])["embed"] < 1000
    with connection() as conn:
        documents.upsert_pending(conn, kb_id=kb["id"], s3_key=doc["s3_key"], filename="a.txt", size_bytes=10,
                                 run_id="run2")
    assert _durations(doc["id"]) == {}


class _Lines(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []

    def emit(self, record):
        self.lines.append(json.loads(self.format(record)))


def test_every_log_line_of_a_step_names_its_document_and_run(pending_doc):
    kb, doc = pending_doc
    lines = _Lines()
    lines.setFormatter(steps.logger.registered_formatter)
    steps.logger.addHandler(lines)
    try:
        with steps._step(_batch(kb, doc), "embed"):
            steps.logger.info("inside the step")
        steps.logger.info("after the step")
    finally:
        steps.logger.removeHandler(lines)
    inside, after = lines.lines
    assert (inside["document_id"], inside["run_id"], inside["step"]) == (doc["id"], "run1", "embed")
    assert "document_id" not in after and "run_id" not in after


@pytest.mark.parametrize("fault,transient", [
    (psycopg.OperationalError("server closed the connection"), True),
    (ConnectionResetError("reset"), True),
    (KeyError("bucket"), False),
])
def test_faults_worth_a_retry_leave_a_step_as_transient(pending_doc, fault, transient):
    kb, doc = pending_doc
    with pytest.raises(Exception) as raised:
        with steps._step(_batch(kb, doc), "chunk"):
            raise fault
    assert isinstance(raised.value, Transient) is transient
    assert "chunk" not in _durations(doc["id"])  # a failed attempt records no time


def test_a_restart_claims_the_document_only_from_the_run_it_read(pending_doc):
    """The reconcile sweep and the sync restart a run by compare-and-set: a run the
    trigger started meanwhile is not superseded, and a stale start cannot record its
    execution on the row."""
    _, doc = pending_doc
    with connection() as conn:
        assert documents.claim_run(conn, doc["id"], expected_run_id="someone-else", run_id="r2",
                                   run_attempts=1) is None
        claimed = documents.claim_run(conn, doc["id"], expected_run_id="run1", run_id="r2", run_attempts=1)
        assert (claimed["current_run_id"], claimed["run_attempts"], claimed["status"]) == ("r2", 1, "PENDING")
        documents.set_execution(conn, doc["id"], "run1", "arn:stale")
        documents.set_execution(conn, doc["id"], "r2", "arn:current")
        assert documents.get(conn, doc["id"])["execution_arn"] == "arn:current"


def test_the_trigger_gives_its_connection_back_after_each_event(pending_doc, local_env, monkeypatch):
    """A burst opens a trigger worker per object; none may keep a connection afterwards
    (100 files at once held all of PostgreSQL's 100). The event still does its work."""
    from chalicelib import aws
    from chalicelib.documents import trigger
    from chalicelib.storage import db

    for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"):
        monkeypatch.setenv(name, local_env[name])
    aws.client.cache_clear()  # a client made before would not know the emulator's endpoint
    kb, doc = pending_doc
    event = {"Records": [{"eventVersion": "2.1", "eventSource": "aws:s3", "eventName": "ObjectRemoved:Delete",
                          "s3": {"bucket": {"name": local_env["KB_BUCKET"]},
                                 "object": {"key": doc["s3_key"], "size": 10}}}]}
    assert trigger.handle_s3_event(event)["deleted"] == 1
    assert db._conn is None
    with connection() as conn:
        assert documents.get(conn, doc["id"]) is None
    aws.client.cache_clear()
