"""The pipeline's data, typed once and shared by the trigger, the steps and storage.

Every step reads and answers one of these records, and each travels as JSON under the
camelCase names of its fields (chalicelib/records.py, JsonRecord): RunState is the state
machine's payload from the trigger's input to Finalize (infra/ingestion.asl.json reads
$.outcome, $.manifestKey…); BatchInput is one child of the Embed Map; RunEnd is what a
run's last step answers. WorkFiles names every S3 work file of a run, and Chunk
(chalicelib/records.py, which storage reads too) is one passage as the Chunk step cuts
it, the Embed step completes it and storage writes it."""
from dataclasses import dataclass, field
from typing import Any, Optional

from chalicelib.records import Chunk, JsonRecord  # noqa: F401 - Chunk: the pipeline's modules take it from here

# What a step answers in RunState.outcome; the state machine's Choice states route on them.
EXTRACTED, UNCHANGED, CHUNKED, STORED, SUPERSEDED, FAILED = (
    "EXTRACTED", "UNCHANGED", "CHUNKED", "STORED", "SUPERSEDED", "FAILED")
# MarkFailed's answer for a run cut short: the document stays in flight for the reconcile sweep.
IN_FLIGHT = "IN_FLIGHT"


@dataclass
class Failure(JsonRecord):
    code: str
    message: str


@dataclass
class RunState(JsonRecord):
    """One ingestion run of one document, from the trigger's input to Finalize. The
    trigger fills the first five fields; each step answers the state with its own
    results set (Extract: the text or its work file, the page count and hash; Chunk:
    the chunk count and the batch manifest) and the Choice states route on outcome."""
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
    chunk_count: Optional[int] = None
    # The Embed Map's items: the work file (WorkFiles.manifest) listing the batches, which
    # the distributed Map reads from S3 so the payload stays small whatever the document.
    manifest_key: Optional[str] = None
    batch_count: Optional[int] = None
    failure: Optional[dict] = None  # Failure.to_json(): a document that cannot be ingested
    error: Optional[dict] = None  # Error/Cause, put there by a Catch
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class BatchItem(JsonRecord):
    """One item of the Embed Map's manifest."""
    batch: int


@dataclass
class BatchInput(JsonRecord):
    """One child of the Embed Map (the Map's ItemSelector builds it from the run's state and
    its manifest item)."""
    batch: int
    document_id: str
    kb_id: str
    bucket: str
    run_id: str


@dataclass
class RunEnd(JsonRecord):
    """What Finalize and MarkFailed answer: the execution's output."""
    document_id: str
    outcome: str  # STORED, SUPERSEDED, UNCHANGED, FAILED or IN_FLIGHT
    chunk_count: Optional[int] = None
    error_code: Optional[str] = None


@dataclass(frozen=True)
class WorkFiles:
    """The S3 work files of one run, all under one prefix that the run deletes at its end."""
    prefix: str  # {work prefix}{documentId}/{runId}/

    @classmethod
    def of(cls, work_prefix: str, document_id: str, run_id: str) -> "WorkFiles":
        return cls(f"{work_prefix}{document_id}/{run_id}/")

    @property
    def extracted(self) -> str:
        return self.prefix + "extracted.json"

    @property
    def manifest(self) -> str:
        return self.prefix + "batches.json"

    def chunks(self, batch: int) -> str:
        """A batch of chunks as the Chunk step cut them."""
        return f"{self.prefix}chunks-{batch:05d}.json"

    def embedded(self, batch: int) -> str:
        """The same batch with its vectors, as the Embed step wrote it."""
        return f"{self.prefix}embedded-{batch:05d}.json"
