"""The pipeline's data, typed once and shared by the trigger, the steps and storage.

RunState is the state machine's payload (infra/ingestion.asl.json reads its JSON
names: $.outcome, $.batches, $.embedded…); Chunk (chalicelib/records.py, which storage
reads too) is one passage as the Chunk step cuts it, the Embed step completes it and
storage writes it. Both travel as JSON (in the state and in S3 work files) under the
camelCase names below."""
from dataclasses import dataclass, field
from typing import Any, Optional

from chalicelib.records import Chunk, JsonRecord  # noqa: F401 - Chunk: the pipeline's modules take it from here

# What a step answers in RunState.outcome; the state machine's Choice states route on them.
EXTRACTED, UNCHANGED, CHUNKED, STORED, SUPERSEDED, FAILED = (
    "EXTRACTED", "UNCHANGED", "CHUNKED", "STORED", "SUPERSEDED", "FAILED")


@dataclass
class Failure(JsonRecord):
    code: str
    message: str


@dataclass
class RunState(JsonRecord):
    """One ingestion run of one document, from the trigger's input to Finalize."""
    document_id: str
    kb_id: str
    bucket: str
    key: str
    run_id: str
    outcome: Optional[str] = None
    superseded: Optional[bool] = None
    extracted_key: Optional[str] = None
    extracted: Optional[dict] = None  # a small document's text, in the state instead of a work file
    page_count: Optional[int] = None
    content_hash: Optional[str] = None
    batches: Optional[list[str]] = None
    chunk_count: Optional[int] = None
    embedded: Optional[list[str]] = None
    failure: Optional[dict] = None
    error: Optional[dict] = None  # Error/Cause, put there by a Catch
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class BatchState(JsonRecord):
    """One Embed Map iteration (the Map's ItemSelector builds it)."""
    batch_key: str
    document_id: str
    kb_id: str
    bucket: str
    run_id: str
