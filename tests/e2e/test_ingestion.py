"""The ingestion pipeline through the emulator: every real format, every failure
code, idempotency, atomic replacement and a retried fault in Store."""
import io
import json
import threading
import time
import zipfile

import psycopg
import pytest

from tests.e2e.conftest import find_document, wait_for_status

BUCKET = "kb-documents-local"


@pytest.fixture(scope="module")
def kb(api):
    answer = api.call("POST", "/knowledge-bases", {"name": "Formats", "description": "",
                                                  "chunking": {"chunkTokens": 200, "chunkOverlap": 20}})
    assert answer.status_code == 201, answer.text
    return answer.json()["data"]


def _chunks(db, doc_id):
    return db.execute("SELECT id, chunk_index, content, page, headers, metadata, start_char, end_char,"
                      " token_count FROM chunks WHERE document_id = %s ORDER BY chunk_index",
                      (doc_id,)).fetchall()


def _put_and_wait(api, s3, kb, name, body, **extra):
    """Upload, then wait for the run this upload started (not an earlier state)."""
    filename = name.rsplit("/", 1)[-1]
    before = find_document(api, kb["id"], filename)
    s3.put_object(Bucket=BUCKET, Key=f"kb/{kb['id']}/{name}", Body=body, **extra)
    return wait_for_status(api, kb["id"], filename,
                           changed_since=before["updatedAt"] if before else None)[0]


def _search(api, kb, query, top_k=5):
    answer = api.call("POST", f"/knowledge-bases/{kb['id']}/search", {"query": query, "topK": top_k})
    assert answer.status_code == 200, answer.text
    return answer.json()["data"]["results"]


def test_every_shared_document_ingests_with_pages_and_headings(api, s3, kb, db, shared_docs):
    names = sorted(p.name for p in shared_docs.iterdir())
    for name in names:
        s3.put_object(Bucket=BUCKET, Key=f"kb/{kb['id']}/shared/{name}", Body=(shared_docs / name).read_bytes())
    docs = {name: wait_for_status(api, kb["id"], name, timeout=300)[0] for name in names}

    # The one file with no text at all fails as such; everything else is indexed.
    assert docs["tbl-having-tables.docx"]["status"] == "FAILED"
    assert docs["tbl-having-tables.docx"]["error"]["code"] == "NO_TEXT"
    for name, doc in docs.items():
        if name == "tbl-having-tables.docx":
            continue
        assert doc["status"] == "PROCESSED", (name, doc["error"])
        chunks = _chunks(db, doc["id"])
        assert chunks and doc["chunks"] == len(chunks) and doc["tokens"] == sum(c["token_count"] for c in chunks)
        # every step's time is there as soon as the document reads PROCESSED: Store's is written
        # by the transaction that sets it
        steps = set(doc["stepDurationsMs"])
        assert doc["contentHash"] and steps >= {"extract", "chunk", "embed", "store"}, (name, steps)
        if name.endswith(".pdf"):
            assert doc["pages"] >= 1
            assert all(1 <= c["page"] <= doc["pages"] for c in chunks)
            assert [c["page"] for c in chunks] == sorted(c["page"] for c in chunks)
    vicksburg = _chunks(db, docs["Seige_of_Vicksburg_Sample_OCR.pdf"]["id"])
    assert docs["Seige_of_Vicksburg_Sample_OCR.pdf"]["pages"] == 6
    assert {c["page"] for c in vicksburg} == set(range(1, 7))
    markdown = _chunks(db, docs["pypdf-extract-text.md"]["id"])
    assert all(c["headers"][0] == "Extract Text from a PDF" for c in markdown)
    assert any(len(c["headers"]) == 2 for c in markdown)
    docx = _chunks(db, docs["par-known-paragraphs.docx"]["id"])
    assert docx[-1]["headers"] == ["Heading Paragraph"]

    top = _search(api, kb, "siege of Vicksburg", 3)[0]
    assert top["source"] == "Seige_of_Vicksburg_Sample_OCR.pdf" and top["page"] in range(1, 7)
    assert top["path"] == "shared/Seige_of_Vicksburg_Sample_OCR.pdf"
    guide = _search(api, kb, "extract text from a PDF with pypdf", 3)[0]
    assert guide["path"] == "shared/pypdf-extract-text.md" and guide["page"] is None
    assert guide["section"].startswith("Extract Text from a PDF") and guide["section"] == " > ".join(guide["headers"])


def _zip_bomb(inflated: int) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        zf.writestr("[Content_Types].xml", "<Types/>")
        zf.writestr("word/document.xml", "<w:document/>")
        with zf.open("word/media/zeros.bin", "w") as part:
            block = b"\0" * (8 << 20)
            for _ in range(inflated // len(block)):
                part.write(block)
    return out.getvalue()


def _encrypted_pdf(shared_docs) -> bytes:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(shared_docs / "crazyones.pdf"))
    writer.encrypt(user_password="secret", owner_password="owner")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


GOOD = "The harbour master opens the lock gates at dawn and closes them at dusk."


@pytest.mark.parametrize("case", ["corrupt_pdf", "encrypted_pdf", "zip_bomb_docx", "empty", "unsupported"])
def test_a_bad_version_fails_with_its_code_and_the_good_one_stays_searchable(api, s3, kb, shared_docs, case):
    bad, code = {
        "corrupt_pdf": (b"%PDF-1.7\n" + b"\x00\xff" * 500, "CORRUPT_FILE"),
        "encrypted_pdf": (_encrypted_pdf(shared_docs), "ENCRYPTED"),
        "zip_bomb_docx": (_zip_bomb(600 << 20), "UNCOMPRESSED_TOO_LARGE"),
        "empty": (b"", "NO_TEXT"),
        "unsupported": (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)), "UNSUPPORTED_TYPE"),
    }[case]
    name = f"failures/{case}.txt"
    good = _put_and_wait(api, s3, kb, name, f"{GOOD} Case {case}.".encode())
    assert good["status"] == "PROCESSED"
    failed = _put_and_wait(api, s3, kb, name, bad)
    assert failed["status"] == "FAILED"
    assert failed["error"]["code"] == code, failed["error"]
    assert failed["error"]["message"]
    hits = [r for r in _search(api, kb, f"harbour lock gates case {case}", 10) if r["source"] == f"{case}.txt"]
    assert hits and f"Case {case}." in hits[0]["content"]


def test_a_duplicate_event_or_the_same_bytes_do_no_new_work(api, s3, kb, db):
    body = b"Penguins huddle together to survive the antarctic winter."
    doc = _put_and_wait(api, s3, kb, "dupes/penguins.txt", body)
    before = _chunks(db, doc["id"])
    for _ in range(2):  # the same bytes again: a new event, nothing to embed
        again = _put_and_wait(api, s3, kb, "dupes/penguins.txt", body)
        assert again["status"] == "PROCESSED" and again["id"] == doc["id"]
    assert [c["id"] for c in _chunks(db, doc["id"])] == [c["id"] for c in before]


FACTS = {"filesize", "uploadedAt", "uploadedBy", "totalChunks"}


def test_metadata_from_s3_and_the_sidecar_reaches_every_chunk(api, s3, kb, db):
    key = f"kb/{kb['id']}/meta/otters.txt"
    s3.put_object(Bucket=BUCKET, Key=key + ".metadata.json", Body=json.dumps(
        {"metadataAttributes": {"team": "biology", "year": 2024,
                                "region": {"value": {"type": "STRING", "stringValue": "north"}}}}).encode())
    doc = _put_and_wait(api, s3, kb, "meta/otters.txt", b"Sea otters hold hands while they sleep.",
                        Metadata={"source-system": "wiki"})
    assert doc["status"] == "PROCESSED"
    expected = {"team": "biology", "year": 2024, "region": "north", "source-system": "wiki"}
    assert doc["metadata"] == expected
    assert all(c["metadata"] == expected for c in _chunks(db, doc["id"]))
    hit = _search(api, kb, "otters sleeping", 1)[0]
    # the attributes, beside the document's own facts (size, upload, chunk count)
    assert {k: v for k, v in hit["metadata"].items() if k not in FACTS} == expected
    # Changing only the sidecar re-runs the document and updates the metadata without new embeddings.
    ids = [c["id"] for c in _chunks(db, doc["id"])]
    s3.put_object(Bucket=BUCKET, Key=key + ".metadata.json",
                  Body=json.dumps({"metadataAttributes": {"team": "zoology"}}).encode())
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        chunks = _chunks(db, doc["id"])
        if chunks[0]["metadata"].get("team") == "zoology":
            break
        time.sleep(0.25)
    assert chunks[0]["metadata"] == {"team": "zoology", "source-system": "wiki"}
    assert [c["id"] for c in chunks] == ids
    assert wait_for_status(api, kb["id"], "otters.txt")[0]["status"] == "PROCESSED"


def test_a_changed_upload_replaces_the_old_version_with_no_gap_or_mix(api, s3, kb):
    old = "\n\n".join(f"Version alpha paragraph {i}: the llama farm grows alfalfa." for i in range(30))
    new = "\n\n".join(f"Version beta paragraph {i}: the llama farm grows barley." for i in range(30))
    doc = _put_and_wait(api, s3, kb, "versions/farm.txt", old.encode())
    assert doc["status"] == "PROCESSED"
    seen, stop, errors = [], threading.Event(), []

    def search_loop():
        while not stop.is_set():
            try:
                results = [r for r in _search(api, kb, "llama farm crops", 20) if r["source"] == "farm.txt"]
                seen.append({("alpha" if "alpha" in r["content"] else "") + ("beta" if "beta" in r["content"] else "")
                             for r in results})
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

    searcher = threading.Thread(target=search_loop)
    searcher.start()
    try:
        deadline = time.monotonic() + 30
        while not seen and time.monotonic() < deadline:  # the old version is seen before the upload
            time.sleep(0.05)
        s3.put_object(Bucket=BUCKET, Key=f"kb/{kb['id']}/versions/farm.txt", Body=new.encode())
        wait_for_status(api, kb["id"], "farm.txt", wanted=("PROCESSED",), timeout=120,
                        changed_since=doc["updatedAt"])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (seen and seen[-1] == {"beta"}):
            time.sleep(0.2)
    finally:
        stop.set()
        searcher.join()
    assert not errors
    assert all(s in ({"alpha"}, {"beta"}) for s in seen), [s for s in seen if s not in ({"alpha"}, {"beta"})]
    assert seen[0] == {"alpha"} and seen[-1] == {"beta"}, seen


@pytest.mark.serial  # locks the stack's chunks table and cancels whatever waits on it
def test_a_fault_in_store_is_retried_without_duplicate_chunks(api, s3, kb, db, local_env, aws):
    """Hold a lock that Store needs and cancel Store's statement while it waits, as its
    lock_timeout would (both are the same Transient in storage/db.py; waiting out the
    pipeline's 30 s took that long of make test): the first attempt fails, the state
    machine's Retry runs it again, and the document ends up stored once."""
    body = "\n\n".join(f"Lighthouse log entry {i}: fog horn tested." for i in range(40)).encode()
    with psycopg.connect(local_env["DATABASE_URL"]) as blocker:
        blocker.execute("LOCK TABLE chunks IN SHARE MODE")  # blocks Store's DELETE/INSERT
        s3.put_object(Bucket=BUCKET, Key=f"kb/{kb['id']}/faults/log.txt", Body=body)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # wait until Store is queued behind the lock
            waiting = [r["pid"] for r in db.execute(
                "SELECT l.pid FROM pg_locks l JOIN pg_class c ON c.oid = l.relation"
                " WHERE c.relname = 'chunks' AND NOT l.granted")]
            if waiting:
                break
            time.sleep(0.2)
        assert waiting, "Store never reached the chunks table"
        for pid in waiting:  # that attempt fails as a lock_timeout would fail it
            db.execute("SELECT pg_cancel_backend(%s)", (pid,))
        time.sleep(1)
        blocker.rollback()
    doc, _ = wait_for_status(api, kb["id"], "log.txt", timeout=120)
    assert doc["status"] == "PROCESSED", doc["error"]
    chunks = _chunks(db, doc["id"])
    assert [c["chunk_index"] for c in chunks] == list(range(doc["chunks"]))
    sfn = aws.client("stepfunctions", endpoint_url=local_env["AWS_ENDPOINT_URL"])
    arn = db.execute("SELECT execution_arn FROM documents WHERE id = %s", (doc["id"],)).fetchone()["execution_arn"]
    events = sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"]
    failed_tasks = [e for e in events if e["type"] in ("TaskFailed", "LambdaFunctionFailed")]
    assert failed_tasks, "the first Store attempt should have failed and been retried"


@pytest.mark.serial  # the sweep reads the stack's 500 oldest unfinished runs: a benchmark's rows would crowd it
def test_a_run_that_ended_without_a_verdict_is_restarted_then_given_up(api, s3, kb, db, lambda_client):
    """An emulator or Lambda restart ends executions mid-run: the sweep starts the
    document again (it ends PROCESSED); after MAX_RUN_ATTEMPTS restarts it gives up."""
    from chalicelib.documents.reconcile import MAX_RUN_ATTEMPTS

    revived = _put_and_wait(api, s3, kb, "reconcile/revived.txt", b"A revived run about kites.")
    arn = db.execute("SELECT execution_arn FROM documents WHERE id = %s", (revived["id"],)).fetchone()["execution_arn"]
    db.execute("UPDATE documents SET status = 'PROCESSING', current_run_id = 'r-ended', indexed_hash = NULL,"
               " updated_at = now() - interval '10 minutes' WHERE id = %s", (revived["id"],))
    hopeless = db.execute(
        "INSERT INTO documents (id, kb_id, s3_key, filename, status, execution_arn, current_run_id, run_attempts,"
        " updated_at) VALUES (%s, %s, %s, 'lost.txt', 'PROCESSING', %s, 'r1', %s, now() - interval '1 day')"
        " RETURNING id", (f"doc_stuck{secrets_hex()}", kb["id"], f"kb/{kb['id']}/reconcile/lost.txt",
                          arn.rsplit(":", 1)[0] + ":no-such-run", MAX_RUN_ATTEMPTS)).fetchone()["id"]
    answer = lambda_client.invoke(FunctionName="kb-service-pipeline-reconcile",
                                  Payload=json.dumps({"minAgeSeconds": 60}).encode())
    runs = json.loads(answer["Payload"].read())["runs"]
    assert revived["id"] in runs["restarted"] and hopeless in runs["failed"], runs
    doc, _ = wait_for_status(api, kb["id"], "revived.txt")
    assert doc["status"] == "PROCESSED" and doc["chunks"] == 1
    assert db.execute("SELECT run_attempts FROM documents WHERE id = %s", (revived["id"],)).fetchone()["run_attempts"] == 1
    row = db.execute("SELECT status, error_code FROM documents WHERE id = %s", (hopeless,)).fetchone()
    assert (row["status"], row["error_code"]) == ("FAILED", "EXECUTION_ENDED")


def secrets_hex() -> str:
    import secrets

    return secrets.token_hex(6)


def test_deleting_a_knowledge_base_deletes_documents_chunks_and_objects(api, s3, db):
    kb = api.call("POST", "/knowledge-bases", {"name": "Doomed"}).json()["data"]
    doc = _put_and_wait(api, s3, kb, "a/b/notes.txt", b"Temporary notes about comets.")
    assert doc["status"] == "PROCESSED"
    assert api.call("DELETE", f"/knowledge-bases/{kb['id']}").status_code == 200
    assert api.call("GET", f"/knowledge-bases/{kb['id']}").status_code == 404
    assert api.call("DELETE", f"/knowledge-bases/{kb['id']}").status_code == 404
    assert db.execute("SELECT count(*) AS n FROM documents WHERE kb_id = %s", (kb["id"],)).fetchone()["n"] == 0
    assert db.execute("SELECT count(*) AS n FROM chunks WHERE kb_id = %s", (kb["id"],)).fetchone()["n"] == 0
    assert s3.list_objects_v2(Bucket=BUCKET, Prefix=f"kb/{kb['id']}/").get("KeyCount", 0) == 0
