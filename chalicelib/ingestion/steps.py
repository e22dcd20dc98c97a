"""The Lambda tasks of the ingestion state machine (infra/ingestion.asl.json).

Each step reads one record of chalicelib/ingestion/model.py and answers one (RunState,
or RunEnd at a run's end; an Embed child answers nothing). Large data (the text, the chunks,
their vectors) goes to work files in S3 that WorkFiles names, so the state machine's payload
stays small whatever the document's size. A fault worth retrying leaves a step as
errors.Transient, which the state machine retries; any other exception is a defect and goes
straight to MarkFailed."""
import hashlib
import json
import time
from contextlib import contextmanager
from dataclasses import replace
from typing import Iterator

import psycopg
from botocore.exceptions import BotoCoreError, ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotoConnectionError

from chalicelib import freshness, indexing, limits, metrics
from chalicelib.config import load_settings
from chalicelib.embeddings import get_provider
from chalicelib.errors import Transient
from chalicelib.ingestion import common_lines, map_run, objects
from chalicelib.ingestion.chunk import chunk_document
from chalicelib.ingestion.context import embedded_text, fitting_overlap, fitting_tokens, with_context, within_window
from chalicelib.ingestion.errors import IngestionError
from chalicelib.ingestion.extract import Extracted, Limits, extract
from chalicelib.ingestion.semantic_chunk import SEMANTIC, semantic_chunks
from chalicelib.ingestion.model import (CHUNKED, EXTRACTED, FAILED, IN_FLIGHT, STORED, SUPERSEDED, UNCHANGED,
                                        BatchInput, BatchItem, Chunk, Failure, RunEnd, RunState, WorkFiles)
from chalicelib.process import LOGGER
from chalicelib.records import StepClock
from chalicelib.storage import chunk_versions
from chalicelib.storage import chunks as chunk_rows
from chalicelib.storage import connection, document_status, documents, kb_lines, knowledge_bases

# One JSON line per message, each with the document and run it is about.
logger = LOGGER
EMBED_BATCH = 64
# A document whose text is this small in JSON travels in the state machine's payload (its
# limit is 256 KB) rather than as a work file in S3: four requests fewer per page.
INLINE_TEXT_MAX_BYTES = 100_000
# S3 answers these with a 4xx, but they pass: a retry is the documented remedy.
_RETRYABLE_S3_CODES = {"SlowDown", "RequestTimeout", "Throttling", "ThrottlingException"}


def is_transient(exc: BaseException) -> bool:
    if isinstance(exc, (Transient, psycopg.OperationalError, BotoConnectionError, HTTPClientError,
                        ConnectionError, TimeoutError)):
        return True
    if isinstance(exc, ClientError):
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 500)
        return status >= 500 or exc.response.get("Error", {}).get("Code") in _RETRYABLE_S3_CODES
    return False


@contextmanager
def _logged(state: RunState | BatchInput, name: str) -> Iterator[None]:
    """Every log line in the block names the document, the run and the step."""
    logger.append_keys(document_id=state.document_id, run_id=state.run_id, step=name)
    try:
        yield
    finally:
        logger.remove_keys(["document_id", "run_id", "step"])


@contextmanager
def _step(state: RunState | BatchInput, name: str, *, timed_by_switch: bool = False) -> Iterator[StepClock]:
    """Logs carry the document and run; a transient fault becomes Transient; the
    time spent is added to the document's stepDurationsMs[name]. Store (timed_by_switch)
    hands the clock to the switch that makes the document PROCESSED, which adds its time in
    the same transaction: a client never reads PROCESSED without it."""
    clock = StepClock(name, time.monotonic())
    with _logged(state, name):
        try:
            yield clock
        except Exception as exc:
            if is_transient(exc) and not isinstance(exc, Transient):
                logger.warning("transient fault, the state machine will retry: %s", exc)
                raise Transient(f"{name}: {type(exc).__name__}: {exc}") from exc
            raise
        millis = clock.millis()
        logger.info("%s took %d ms", name, millis, extra={"duration_ms": millis})
        if not timed_by_switch:
            _record_duration(state, name, millis)


def _record_duration(state: RunState | BatchInput, name: str, millis: int) -> None:
    """Best effort: the step's work is done, and a lost timing must not make the
    state machine run it again (for Embed, the provider would be paid twice)."""
    try:
        with connection() as conn:
            documents.add_step_duration(conn, state.document_id, state.run_id, name, millis)
    except Exception as exc:
        logger.warning("could not record the step's duration: %s", exc)


def _work(state: RunState | BatchInput) -> WorkFiles:
    return WorkFiles.of(load_settings().work_prefix, state.document_id, state.run_id)


def _knowledge_base(conn, kb_id: str) -> dict:
    kb = knowledge_bases.get_for_pipeline(conn, kb_id)
    if kb is None:
        raise IngestionError("KB_NOT_FOUND", f"knowledge base {kb_id} no longer exists")
    return kb


def _failed(state: RunState, err: IngestionError) -> dict:
    """A document that cannot be ingested is an answer, not a fault: the state
    machine routes it to MarkFailed without retrying."""
    return replace(state, outcome=FAILED, failure=Failure(err.code, err.message).to_json()).to_json()


def extract_step(event: dict) -> dict:
    settings = load_settings()
    state = RunState.from_json(event)
    with _step(state, "extract"):
        try:
            head = objects.head(state.bucket, state.key)
            if head["ContentLength"] > settings.max_file_bytes:
                raise IngestionError("FILE_TOO_LARGE", f"the file has {head['ContentLength']} bytes;"
                                                       f" the limit is {settings.max_file_bytes}")
            metadata = {**head.get("Metadata", {}), **objects.read_sidecar_metadata(state.bucket, state.key)}
            data = objects.read_bytes(state.bucket, state.key)
            content_hash = hashlib.sha256(data).hexdigest()
            with connection() as conn:
                doc = documents.get(conn, state.document_id)
                if doc is None or doc["current_run_id"] != state.run_id:
                    logger.info("a newer run owns the document; this one stops")
                    return replace(state, outcome=UNCHANGED, superseded=True).to_json()
                if doc["indexed_hash"] == content_hash:
                    if document_status.mark_unchanged(conn, state.document_id, state.run_id, metadata):
                        freshness.bump(state.kb_id)  # the chunks' metadata may have changed
                    return replace(state, outcome=UNCHANGED).to_json()
                document_status.mark_processing(conn, state.document_id, state.run_id, content_hash=content_hash,
                                                size_bytes=len(data), metadata=metadata)
            extracted = extract(data, state.key.rsplit("/", 1)[-1],
                                Limits(settings.max_pages, settings.max_uncompressed_bytes))
        except IngestionError as err:
            return _failed(state, err)
        with connection() as conn:
            documents.set_content_type(conn, state.document_id, extracted.content_type)
        text = extracted.to_dict()
        if len(json.dumps(text)) > INLINE_TEXT_MAX_BYTES:
            extracted_key, text = objects.write_json(state.bucket, _work(state).extracted, text), None
        else:
            extracted_key = None
    return replace(state, outcome=EXTRACTED, extracted_key=extracted_key, extracted=text,
                   page_count=extracted.page_count, content_hash=content_hash).to_json()


def chunk_step(event: dict) -> dict:
    state = RunState.from_json(event)
    with _step(state, "chunk"):
        with connection() as conn:
            kb = knowledge_bases.get_for_pipeline(conn, state.kb_id)
            doc = documents.get(conn, state.document_id)
        if kb is None or doc is None:
            return _failed(state, IngestionError("KB_NOT_FOUND", "the knowledge base or document was deleted"))
        extracted = Extracted.from_dict(state.extracted if state.extracted is not None
                                        else objects.read_json(state.bucket, state.extracted_key))
        state = replace(state, extracted=None)
        if len(extracted.sections) > limits.MAX_SECTIONS_PER_FILE:
            return _failed(state, IngestionError(
                "TOO_MANY_SECTIONS", f"the file has {len(extracted.sections):,} sections (pages, headings);"
                                     f" the limit is {limits.MAX_SECTIONS_PER_FILE:,}"))
        had_text = bool(extracted.sections)
        extracted = _without_common_lines(state, extracted)  # a page of navigation alone counts too
        note = extracted.note or (COMMON_LINES_ONLY if had_text and not extracted.sections else None)
        chunks = within_window(with_context(_chunked(kb, extracted, doc["metadata"]), extracted.title, doc["path"]),
                               kb["embedding_provider"])
        if not chunks and not note:
            return _failed(state, IngestionError("NO_TEXT", "the document has no text to index"))
        if len(chunks) > limits.MAX_CHUNKS_PER_DOCUMENT:  # before any embedding work
            return _failed(state, IngestionError(
                "TOO_MANY_CHUNKS", f"the document makes {len(chunks):,} chunks of up to {fitting_tokens(kb)}"
                                   f" tokens (what the knowledge base's model reads of one); the limit is"
                                   f" {limits.MAX_CHUNKS_PER_DOCUMENT:,} a document"))
        if len(chunks) > EMBED_BATCH:
            return _fanned_out(state, chunks).to_json()
    return _embed_and_store_here(state, kb, chunks, note if not chunks else None)


def _fanned_out(state: RunState, chunks: list[Chunk]) -> RunState:
    """The chunks written in batches of EMBED_BATCH, and the manifest that lists them for the
    Embed Map (a distributed Map reads its items from S3: the state stays small)."""
    work = _work(state)
    starts = range(0, len(chunks), EMBED_BATCH)
    for batch, start in enumerate(starts):
        objects.write_chunks(state.bucket, work.chunks(batch), chunks[start:start + EMBED_BATCH])
    manifest = objects.write_json(state.bucket, work.manifest, [BatchItem(b).to_json() for b in range(len(starts))])
    logger.info("cut %d chunks into %d batches", len(chunks), len(starts))
    return replace(state, outcome=CHUNKED, manifest_key=manifest, batch_count=len(starts), chunk_count=len(chunks))


COMMON_LINES_ONLY = ("every line of it is repeated across many documents of the knowledge base"
                     " (navigation, footers): nothing to index")


def _without_common_lines(state: RunState, extracted: Extracted) -> Extracted:
    """The document's lines counted for its knowledge base, and those common to many of
    its documents dropped (chalicelib/ingestion/common_lines.py)."""
    hashes = common_lines.line_hashes(extracted)
    with connection() as conn:
        if not kb_lines.record(conn, state.document_id, state.run_id, hashes):
            return extracted  # a newer run owns the document: its Store step stops this one
        counts = kb_lines.counts(conn, state.kb_id, hashes, common_lines.MIN_DOCUMENTS)
    return common_lines.without(extracted, common_lines.common(counts))


def _chunked(kb: dict, extracted: Extracted, metadata: dict) -> list[Chunk]:
    """The document cut by the knowledge base's strategy; the semantic one embeds its
    sentences with the knowledge base's provider (timed as the chunks' embeddings are)."""
    if kb["chunk_strategy"] != SEMANTIC:
        return chunk_document(extracted, fitting_tokens(kb), fitting_overlap(kb), metadata)
    return semantic_chunks(extracted, fitting_tokens(kb), fitting_overlap(kb), metadata,
                           lambda sentences: _embedded(kb, sentences))


def _embedded(kb: dict, texts: list[str]) -> list[list[float]]:
    """The texts' vectors from the knowledge base's provider, the time it took as a metric."""
    provider = get_provider(kb["embedding_provider"], kb["embedding_model"])
    started = time.monotonic()
    vectors = provider.embed_documents(texts)
    metrics.record_embedding(provider.name, provider.model, time.monotonic() - started)
    return vectors


def _embed_and_store_here(state: RunState, kb: dict, chunks: list[Chunk], note: str | None = None) -> dict:
    """A document of one embedding batch (a one-page file has one to three chunks) is
    embedded and stored by the Chunk task itself, and its run ends there: three task
    invocations (Embed, Store, Finalize) and the batch files' S3 round trips fewer. A
    document with nothing to index (note says why) is stored with no chunks."""
    vectors = []
    if chunks:
        with _step(state, "embed"):
            vectors = _embedded(kb, [embedded_text(c) for c in chunks])
    with _step(state, "store", timed_by_switch=True) as clock:
        stored = _store(state, kb, [replace(c, embedding=v) for c, v in zip(chunks, vectors)], clock, note)
    if state.extracted_key:  # otherwise the run wrote no work file
        _clean_work(state)
    return replace(state, outcome=STORED if stored else SUPERSEDED, chunk_count=len(chunks)).to_json()


def embed_step(event: dict) -> None:
    """One child of the Embed Map: embeds a batch of chunks into its embedded work file
    (WorkFiles.embedded), where Store reads it. It answers nothing: a distributed Map
    gathers its children's answers, and a document of thousands of batches must not
    bring them back over the state's 256 KiB."""
    batch = BatchInput.from_json(event)
    work = _work(batch)
    with _step(batch, "embed"):
        with connection() as conn:
            kb = _knowledge_base(conn, batch.kb_id)
        chunks = objects.read_chunks(batch.bucket, work.chunks(batch.batch))
        vectors = _embedded(kb, [embedded_text(c) for c in chunks])
        objects.write_chunks(batch.bucket, work.embedded(batch.batch),
                             [replace(c, embedding=v) for c, v in zip(chunks, vectors)])


def store_step(event: dict) -> dict:
    """Writes the run's chunks in committed batches, then switches the document to them
    (storage/chunk_versions.py). A retry (the step timed out, the database went away)
    resumes after the last committed batch and reads only the files it still needs."""
    state = RunState.from_json(event)
    with _step(state, "store", timed_by_switch=True) as clock:
        with connection() as conn:
            kb = _knowledge_base(conn, state.kb_id)
            stored = _store_in_batches(conn, state, kb, clock)
    if stored:
        indexing.after_store(state.kb_id)
    if not stored:
        logger.info("a newer run owns the document; its chunks were left alone")
    return replace(state, outcome=STORED if stored else SUPERSEDED).to_json()


def _store_in_batches(conn, state: RunState, kb: dict, clock: StepClock) -> bool:
    where = dict(doc_id=state.document_id, kb_id=state.kb_id, run_id=state.run_id, version=state.run_id)
    start = chunk_versions.begin(conn, **where)
    if start is None:
        return False
    if start != chunk_versions.ALREADY_CURRENT:
        if start:
            logger.info("resuming after %d chunks written by an earlier attempt", start)
        pending: list[Chunk] = []
        work, last = _work(state), state.batch_count - 1
        for i in range(state.batch_count):
            if (i + 1) * EMBED_BATCH <= start:  # each file holds EMBED_BATCH chunks, in order
                continue
            pending += [c for c in objects.read_chunks(state.bucket, work.embedded(i)) if c.chunk_index >= start]
            while len(pending) >= limits.STORE_BATCH_CHUNKS or (pending and i == last):
                batch, pending = pending[:limits.STORE_BATCH_CHUNKS], pending[limits.STORE_BATCH_CHUNKS:]
                if not chunk_versions.stage(conn, dim=kb["embedding_dim"], chunks=batch, **where):
                    chunk_versions.discard(conn, state.document_id, state.run_id)
                    return False
        if not chunk_versions.switch(conn, expected=state.chunk_count, page_count=state.page_count,
                                     content_hash=state.content_hash, clock=clock, **where):
            chunk_versions.discard(conn, state.document_id, state.run_id)
            return False
    chunk_versions.delete_hidden(conn, state.document_id)
    return True


def _store(state: RunState, kb: dict, chunks: list[Chunk], clock: StepClock, note: str | None = None) -> bool:
    with connection() as conn:
        stored = chunk_rows.replace_document_chunks(
            conn, doc_id=state.document_id, kb_id=state.kb_id, dim=kb["embedding_dim"],
            chunks=chunks, page_count=state.page_count, run_id=state.run_id,
            content_hash=state.content_hash, note=note, clock=clock)
    if stored:
        indexing.after_store(state.kb_id)
    else:
        logger.info("a newer run owns the document; its chunks were left alone")
    return stored


def finalize_step(event: dict) -> dict:
    state = RunState.from_json(event)
    with _logged(state, "finalize"):
        logger.info("run finished: %s, %s chunks", state.outcome, state.chunk_count)
    _clean_work(state)
    return RunEnd(state.document_id, state.outcome, chunk_count=state.chunk_count).to_json()


def mark_failed_step(event: dict) -> dict:
    """FAILED with the run's error code, unless the error says only that the run was cut
    short (run_cut_short): then the document stays in flight under this run, and the
    reconcile sweep starts it again once it sees the execution ended. A document this run
    already switched to its chunks keeps that verdict (document_status.mark_failed)."""
    state = RunState.from_json(event)
    if state.error:
        state = replace(state, error=map_run.child_error(state.document_id, state.run_id, state.error))
    cut_short = None if state.failure else run_cut_short(state.error or {})
    if state.failure:
        failure = Failure.from_json(state.failure)
        code, message = failure.code, failure.message
    else:
        code, message = failure_from_error(state.error or {})
    with _logged(state, "mark_failed"):
        if cut_short:
            logger.warning("the run was cut short (%s); the reconcile sweep starts the document again", cut_short)
            code = None
        else:
            with connection() as conn:
                failed = document_status.mark_failed(conn, state.document_id, state.run_id, code, message)
            if failed:
                metrics.record_document_failed(code)
            logger.warning("document failed: %s %s" if failed else
                           "the run failed (%s %s), but the document is no longer in flight under it", code, message)
        _discard_staged(state)
        _clean_work(state)
    return RunEnd(state.document_id, IN_FLIGHT if cut_short else FAILED, error_code=code).to_json()


def failure_from_error(error: dict) -> tuple[str, str]:
    """(code, message) from the Error/Cause that a Catch put into the state.

    An IngestionError's message is JSON with its code. AWS names the error after
    the exception class; ministack's warm workers call every handler error
    Runtime.HandlerError, so the message is parsed whatever the name."""
    name, message = _error_parts(error, "INTERNAL_ERROR")
    try:
        parsed = json.loads(message)
        if isinstance(parsed, dict) and {"code", "message"} <= parsed.keys():
            return str(parsed["code"]), str(parsed["message"])
    except (TypeError, ValueError):
        pass
    if name == "States.Timeout" or name == "Sandbox.Timedout":
        return "TIMEOUT", "a pipeline step ran out of time"
    return "INTERNAL_ERROR", f"{name}: {message}"[:2000]


def _error_parts(error: dict, default_name: str) -> tuple[str, str]:
    """(Error, the function's errorMessage) of the Error/Cause a Catch put into the state;
    a Cause that is not the function's JSON is the message itself."""
    name, cause = error.get("Error", default_name), error.get("Cause", "")
    try:
        detail = json.loads(cause)
    except (TypeError, ValueError):
        return name, str(cause or "")
    return name, (str(detail.get("errorMessage", "")) if isinstance(detail, dict) else str(detail))


# A step whose function's worker went away before it answered: the error says where it ran,
# not what the document holds, so it decides nothing about the document. AWS's names for a
# Lambda service fault or a runtime that exited (a worker killed, out of memory), once the
# state machine's retries are spent on them; and ministack's, whose Lambda workers are its
# own child processes, which `make down` stops with it while its executions' threads run on:
# a worker that cannot start is a RuntimeError or BrokenPipeError there (a handler's own
# exception it always calls Runtime.HandlerError), a worker that died is named by its message.
# Seen when the emulator stopped under five runs: Finalize's "RuntimeError: Worker process
# exited immediately. stderr: " made a stored document FAILED INTERNAL_ERROR (issue 33).
_CUT_SHORT_ERRORS = frozenset({"Runtime.ExitError", "Lambda.ServiceException", "Lambda.AWSLambdaException",
                               "Lambda.SdkClientException", "Lambda.Unknown", "Lambda.TooManyRequestsException",
                               "States.ServiceRestart", "BrokenPipeError"})
_CUT_SHORT_MESSAGES = ("Worker process exited", "Worker process died", "Worker returned no response",
                       "No JSON init response from worker", "Runtime exited")


def run_cut_short(error: dict) -> str | None:
    """"<Error>: <message>" when the Error/Cause a Catch put into the state says the run's
    worker or the emulator went away rather than anything about the document; else None."""
    name, message = _error_parts(error, "")
    if name in _CUT_SHORT_ERRORS or message.startswith(_CUT_SHORT_MESSAGES):
        return f"{name}: {message}"[:500]
    return None


def _discard_staged(state: RunState) -> None:
    """The chunks this run wrote before it failed (hidden from search): best effort, the
    next run of the document deletes what is left."""
    try:
        with connection() as conn:
            chunk_versions.discard(conn, state.document_id, state.run_id)
    except Exception as exc:
        logger.warning("could not delete the failed run's chunks: %s", exc)


def _clean_work(state: RunState) -> None:
    try:
        objects.delete_prefix(state.bucket, _work(state).prefix)
    except (BotoCoreError, ClientError):
        logger.warning("could not delete the pipeline's work objects", exc_info=True)
