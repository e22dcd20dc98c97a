"""The pipeline steps' shared frame (steps._step) against the real database: the time
each step takes, the log lines' document and run, and which faults become Transient."""
import json
import logging
import time

import psycopg
import pytest

from chalicelib.aws import client
from chalicelib.errors import Transient
from chalicelib.ingestion import objects, steps
from chalicelib.ingestion.model import BatchInput, RunState, WorkFiles
from chalicelib.knowledge_bases import create_knowledge_base
from chalicelib.storage import connection, document_status, documents


@pytest.fixture
def pending_doc(tenant):
    principal, _ = tenant
    kb = create_knowledge_base(principal, name="Steps", description="")
    with connection() as conn:
        doc = document_status.upsert_pending(conn, kb_id=kb["id"], s3_key=f"kb/{kb['id']}/a.txt", filename="a.txt",
                                             size_bytes=10, run_id="run1")
    return kb, doc


def _batch(kb, doc, run_id="run1") -> BatchInput:
    return BatchInput(batch=0, document_id=doc["id"], kb_id=kb["id"], bucket="b", run_id=run_id)


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
        document_status.upsert_pending(conn, kb_id=kb["id"], s3_key=doc["s3_key"], filename="a.txt", size_bytes=10,
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
    inside, took, after = lines.lines
    assert (inside["document_id"], inside["run_id"], inside["step"]) == (doc["id"], "run1", "embed")
    assert (took["step"], took["document_id"]) == ("embed", doc["id"]) and took["duration_ms"] >= 0
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
        assert document_status.claim_run(conn, doc["id"], expected_run_id="someone-else", run_id="r2",
                                         run_attempts=1) is None
        claimed = document_status.claim_run(conn, doc["id"], expected_run_id="run1", run_id="r2", run_attempts=1)
        assert (claimed["current_run_id"], claimed["run_attempts"], claimed["status"]) == ("r2", 1, "PENDING")
        documents.set_execution(conn, doc["id"], "run1", "arn:stale")
        documents.set_execution(conn, doc["id"], "r2", "arn:current")
        assert documents.get(conn, doc["id"])["execution_arn"] == "arn:current"


def _removed(bucket: str, key: str) -> dict:
    return {"Records": [{"eventVersion": "2.1", "eventSource": "aws:s3", "eventName": "ObjectRemoved:Delete",
                         "s3": {"bucket": {"name": bucket}, "object": {"key": key, "size": 10}}}]}


def _message(i: int, body) -> dict:
    return {"messageId": f"m{i}", "receiptHandle": f"r{i}", "eventSource": "aws:sqs",
            "body": body if isinstance(body, str) else json.dumps(body)}


@pytest.fixture
def emulator_s3(local_env, monkeypatch):
    from chalicelib import aws

    for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"):
        monkeypatch.setenv(name, local_env[name])
    aws.client.cache_clear()  # a client made before would not know the emulator's endpoint
    yield local_env["KB_BUCKET"]
    aws.client.cache_clear()


def test_the_trigger_takes_a_queue_batch_of_s3_notifications(pending_doc, emulator_s3):
    from chalicelib.documents import trigger

    kb, doc = pending_doc
    batch = {"Records": [_message(0, _removed(emulator_s3, doc["s3_key"])),
                         _message(1, {"Service": "Amazon S3", "Event": "s3:TestEvent"}),
                         _message(2, "not json")]}
    answer = trigger.handle_event(batch)
    assert answer["deleted"] == 1 and answer["batchItemFailures"] == []
    with connection() as conn:
        assert documents.get(conn, doc["id"]) is None


def test_a_database_outage_sends_the_rest_of_the_batch_back_untried(pending_doc, emulator_s3, monkeypatch):
    from chalicelib.documents import trigger

    kb, doc = pending_doc
    tried = []

    def down(*args):
        tried.append(args)
        raise Transient("the database is unavailable")

    monkeypatch.setattr(trigger, "RETRY_DELAYS_SECONDS", ())
    monkeypatch.setattr(trigger, "_delete_by_key", down)
    batch = {"Records": [_message(0, {"Service": "Amazon S3", "Event": "s3:TestEvent"})] +
                        [_message(i, _removed(emulator_s3, f"kb/{kb['id']}/f{i}.txt")) for i in (1, 2, 3)]}
    answer = trigger.handle_event(batch)
    assert answer["batchItemFailures"] == [{"itemIdentifier": m} for m in ("m1", "m2", "m3")]
    assert len(tried) == 1


def test_a_message_that_fails_alone_is_handed_back_alone(pending_doc, emulator_s3, monkeypatch):
    from chalicelib.documents import trigger

    kb, doc = pending_doc
    real_delete = trigger._delete_by_key

    def broken_for_one_key(bucket, kb_id, key):
        if key.endswith("/broken.txt"):
            raise ValueError("a defect met by this message alone")
        return real_delete(bucket, kb_id, key)

    monkeypatch.setattr(trigger, "_delete_by_key", broken_for_one_key)
    batch = {"Records": [_message(0, _removed(emulator_s3, f"kb/{kb['id']}/broken.txt")),
                         _message(1, _removed(emulator_s3, doc["s3_key"]))]}
    answer = trigger.handle_event(batch)
    assert answer["batchItemFailures"] == [{"itemIdentifier": "m0"}] and answer["deleted"] == 1
    with connection() as conn:
        assert documents.get(conn, doc["id"]) is None


@pytest.mark.parametrize("paragraphs,outcome,inline", [(3, "STORED", True), (3, "STORED", False),
                                                      (steps.EMBED_BATCH + 40, "CHUNKED", False)])
def test_a_document_of_one_batch_is_embedded_and_stored_by_chunk(pending_doc, emulator_s3, paragraphs, outcome,
                                                                 inline):
    """One-page files end their run in Chunk (no Map, no Store, no Finalize), their text
    handed over in the state rather than a work file; a longer document still fans out
    into batches for the Map."""
    from chalicelib.ingestion.extract import extract

    kb, doc = pending_doc
    text = "\n\n".join(f"Paragraph {i} tells of lighthouse number {i} and its keeper. " * 30 for i in range(paragraphs))
    state = RunState(document_id=doc["id"], kb_id=kb["id"], bucket=emulator_s3, key=doc["s3_key"], run_id="run1")
    extracted = extract(text.encode(), "a.txt").to_dict()
    handed_over = ({"extracted": extracted} if inline else
                   {"extractedKey": objects.write_json(emulator_s3, steps._work(state).extracted, extracted)})
    answer = steps.chunk_step({**state.to_json(), **handed_over, "outcome": "EXTRACTED"})
    assert "extracted" not in answer  # the text does not travel further
    assert answer["outcome"] == outcome
    with connection() as conn:
        stored = conn.execute("SELECT count(*) AS n FROM chunks WHERE document_id = %s", (doc["id"],)).fetchone()["n"]
        status = documents.get(conn, doc["id"])["status"]
    work = objects.client("s3").list_objects_v2(Bucket=emulator_s3, Prefix=steps._work(state).prefix)
    if outcome == "STORED":
        assert stored == answer["chunkCount"] >= 1 and status == "PROCESSED"
        assert {"chunk", "embed", "store"} <= set(_durations(doc["id"]))
        assert work.get("KeyCount", 0) == 0  # its work files are cleaned up
    else:
        assert stored == 0 and "batches" not in answer
        _embed_and_store_from_the_manifest(answer, emulator_s3)


def _embed_and_store_from_the_manifest(answer: dict, bucket: str) -> None:
    """What the distributed Embed Map does with a CHUNKED run: one Embed child per item of the
    manifest the Chunk step wrote (the Map's ItemSelector builds its input), then Store."""
    state = RunState.from_json(answer)
    assert state.manifest_key == steps._work(state).manifest
    items = objects.read_json(bucket, state.manifest_key)
    assert items == [{"batch": i} for i in range(state.batch_count)]
    assert state.batch_count == -(-state.chunk_count // steps.EMBED_BATCH) >= 2
    for item in items:
        child = BatchInput(batch=item["batch"], document_id=state.document_id, kb_id=state.kb_id, bucket=bucket,
                           run_id=state.run_id)
        assert steps.embed_step(child.to_json()) is None  # a child answers nothing: the Map gathers no vectors
    stored = steps.store_step(answer)
    assert stored["outcome"] == "STORED" and stored["manifestKey"] == state.manifest_key
    with connection() as conn:
        rows = conn.execute("SELECT count(*) AS n, count(embedding) AS e FROM chunks WHERE document_id = %s",
                            (state.document_id,)).fetchone()
        assert rows["n"] == rows["e"] == state.chunk_count
        assert documents.get(conn, state.document_id)["status"] == "PROCESSED"
    end = steps.finalize_step(stored)
    assert end == {"documentId": state.document_id, "outcome": "STORED", "chunkCount": state.chunk_count}
    assert objects.client("s3").list_objects_v2(Bucket=bucket, Prefix=WorkFiles.of(
        steps.load_settings().work_prefix, state.document_id, state.run_id).prefix).get("KeyCount", 0) == 0


def _caught(name: str, message: str) -> dict:
    """The error a Catch puts into the state, as the emulator words it."""
    return {"Error": name, "Cause": json.dumps({"errorMessage": message, "errorType": name})}


def test_a_run_cut_short_or_already_stored_is_not_marked_failed(pending_doc, emulator_s3):
    """Issue 33: the emulator stopped under five runs; one run's Store had switched its
    document to its chunks, Finalize's new worker could not start, and MarkFailed made the
    document FAILED INTERNAL_ERROR. A worker that went away leaves the document in flight
    for the reconcile sweep; a run's switch is its verdict, whatever fails after it."""
    from chalicelib.ingestion.extract import extract

    kb, doc = pending_doc
    state = RunState(document_id=doc["id"], kb_id=kb["id"], bucket=emulator_s3, key=doc["s3_key"], run_id="run1")
    with connection() as conn:
        document_status.mark_processing(conn, doc["id"], "run1", content_hash="h", size_bytes=10, metadata={})
    answer = steps.mark_failed_step({**state.to_json(), "outcome": "EXTRACTED",
                                     "error": _caught("RuntimeError", "Worker process exited immediately. stderr: ")})
    assert answer == {"documentId": doc["id"], "outcome": "IN_FLIGHT"}  # no error code
    with connection() as conn:
        row = documents.get(conn, doc["id"])
        assert (row["status"], row["error_code"]) == ("PROCESSING", None)
        assert doc["id"] in {d["id"] for d in document_status.unfinished(conn, 0)}  # the sweep starts it again

    stored = steps.chunk_step({**state.to_json(), "outcome": "EXTRACTED",
                               "extracted": extract(b"The keeper trims the wick at dusk.", "a.txt").to_dict()})
    assert stored["outcome"] == "STORED"
    for error in (_caught("RuntimeError", "Worker process exited immediately. stderr: "),
                  _caught("Runtime.HandlerError", "KeyError: 'documentId'")):  # a defect after the switch
        steps.mark_failed_step({**stored, "error": error})
        with connection() as conn:
            assert documents.get(conn, doc["id"])["status"] == "PROCESSED", error


LIGHTHOUSES = ["The {0} lighthouse keeper climbs {1} steps every evening to light the lamp.",
               "Its lens was ground in {0} and weighs {1} kilograms.",
               "Supply boats reach the {0} rock only at low tide, twice a month."]


def test_chunks_fit_the_model_and_a_search_answers_the_section_around_the_child(pending_doc, emulator_s3):
    """chunkTokens 500 on the local model (a 256-token window): the chunks stored are cut to what
    the model reads with the context line, which names the document and its section and is
    embedded with each chunk; a search ranks those chunks and answers the section around the one
    that matched, up to 500 tokens, once."""
    from chalicelib.ingestion.context import context_line, fitting_tokens
    from chalicelib.ingestion.extract import extract
    from chalicelib.retrieval import SearchRequest, search
    from chalicelib.storage import knowledge_bases

    kb, doc = pending_doc
    places = ["Northern", "Eastern", "Southern", "Western", "Harbour", "Island", "Cliff", "Bay"]
    body = "\n\n".join(" ".join(s.format(p, 100 + i) for s in LIGHTHOUSES) * 2 for i, p in enumerate(places))
    text = f"# Lighthouses of the coast\n\n{body}\n\n# Keepers' pay\n\nA keeper earns a salary paid by the coast guard."
    state = RunState(document_id=doc["id"], kb_id=kb["id"], bucket=emulator_s3, key=doc["s3_key"], run_id="run1")
    extracted = extract(text.encode(), "a.md").to_dict()
    answer = steps.chunk_step({**state.to_json(), "extracted": extracted, "outcome": "EXTRACTED"})
    assert answer["outcome"] == "STORED"
    with connection() as conn:
        stored_kb = knowledge_bases.get_for_pipeline(conn, kb["id"])
        rows = conn.execute("SELECT chunk_index, token_count, title, headers FROM chunks WHERE document_id = %s"
                            " ORDER BY chunk_index", (doc["id"],)).fetchall()
    assert stored_kb["chunk_tokens"] == 500 and fitting_tokens(stored_kb) < 256
    assert len(rows) > 3 and max(r["token_count"] for r in rows) <= fitting_tokens(stored_kb)
    assert rows[0]["title"] == context_line(None, doc["path"], rows[0]["headers"])
    assert rows[0]["title"] == "Lighthouses of the coast"  # "a.txt" names nothing: the trail alone
    principal = _owner(kb)
    found = search(principal, SearchRequest((kb["id"],), "how heavy is the Harbour lens", 3))
    top = found.passages[0]
    assert top.source == "a.txt" and "Harbour" in top.content
    assert top.span is not None and top.span[0] <= top.chunk_index <= top.span[1] and top.span[0] < top.span[1]
    assert top.tokens <= 500 and top.tokens > max(r["token_count"] for r in rows if r["chunk_index"] == top.chunk_index)
    spans = [(p.document_id, p.span or (p.chunk_index, p.chunk_index)) for p in found.passages]
    for i, (doc_a, (a, b)) in enumerate(spans):  # one passage per parent: no chunk answered twice
        assert not any(doc_a == doc_b and a <= d and c <= b for doc_b, (c, d) in spans[i + 1:])
    by_index = {r["chunk_index"]: r["headers"] for r in rows}
    for p in found.passages:  # a parent never crosses into another section
        first, last = p.span or (p.chunk_index, p.chunk_index)
        assert all(by_index[i] == p.headers for i in range(first, last + 1))
    objects.delete_prefix(emulator_s3, steps._work(state).prefix)


def _owner(kb):
    from chalicelib.auth.principal import Principal

    with connection() as conn:
        user = conn.execute("SELECT owner_id, org_id FROM knowledge_bases WHERE id = %s", (kb["id"],)).fetchone()
        role = conn.execute("SELECT role FROM users WHERE id = %s", (user["owner_id"],)).fetchone()["role"]
    return Principal(user_id=user["owner_id"], org_id=user["org_id"], role=role)


def _failed_map_execution(sfn, child_error: str, child_cause: str) -> str:
    """An execution of a distributed Map whose one child fails as given, on the emulator's
    Step Functions; its ARN once it has ended."""
    definition = {"StartAt": "Embed", "States": {"Embed": {
        "Type": "Map", "ItemsPath": "$.items", "End": True,
        "ItemProcessor": {"ProcessorConfig": {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"},
                          "StartAt": "Batch", "States": {"Batch": {"Type": "Fail", "Error": child_error,
                                                                   "Cause": child_cause}}}}}}
    machine = sfn.create_state_machine(name=f"map-failure-{time.monotonic_ns()}", definition=json.dumps(definition),
                                       roleArn="arn:aws:iam::000000000000:role/states")["stateMachineArn"]
    execution = sfn.start_execution(stateMachineArn=machine, input=json.dumps({"items": [{"batch": 0}]}))
    for _ in range(100):
        described = sfn.describe_execution(executionArn=execution["executionArn"])
        if described["status"] != "RUNNING":
            assert described["error"] == "States.ExceedToleratedFailureThreshold", described
            return execution["executionArn"]
        time.sleep(0.1)
    raise AssertionError("the execution did not end")


@pytest.mark.parametrize("child, status, code", [
    (("IngestionError", json.dumps({"errorMessage": json.dumps({"code": "KB_NOT_FOUND", "message": "gone"})})),
     "FAILED", "KB_NOT_FOUND"),
    (("Runtime.ExitError", json.dumps({"errorMessage": "Runtime exited with error: signal: killed"})),
     "PROCESSING", None)])
def test_a_failed_embed_batch_decides_the_run_as_it_did_inline(pending_doc, emulator_s3, child, status, code):
    """A distributed Map that lost a child says only States.ExceedToleratedFailureThreshold:
    MarkFailed reads the child's own error, so a document's code still reaches its record and a
    worker that went away still leaves the document in flight for the reconcile sweep."""
    kb, doc = pending_doc
    arn = _failed_map_execution(client("stepfunctions"), *child)
    with connection() as conn:
        document_status.mark_processing(conn, doc["id"], "run1", content_hash="h", size_bytes=10, metadata={})
        documents.set_execution(conn, doc["id"], "run1", arn)
    state = RunState(document_id=doc["id"], kb_id=kb["id"], bucket=emulator_s3, key=doc["s3_key"], run_id="run1")
    answer = steps.mark_failed_step({**state.to_json(), "outcome": "CHUNKED", "error": {
        "Error": "States.ExceedToleratedFailureThreshold", "Cause": "The specified tolerated failure threshold was exceeded"}})
    assert answer.get("errorCode") == code
    with connection() as conn:
        row = documents.get(conn, doc["id"])
    assert (row["status"], row["error_code"]) == (status, code)
