"""The pipeline's data, typed once and shared by the trigger, the steps and storage.

RunState is the state machine's payload (infra/ingestion.asl.json reads its JSON
names: $.outcome, $.batches, $.embedded…); Chunk is one passage as the Chunk step
cuts it, the Embed step completes it and storage writes it. Both travel as JSON
(in the state and in S3 work files) under the camelCase names below."""
from dataclasses import dataclass, field, fields
from typing import Any, Optional

from chalicelib.validate import camel_case

# What a step answers in RunState.outcome; the state machine's Choice states route on them.
EXTRACTED, UNCHANGED, CHUNKED, STORED, SUPERSEDED, FAILED = (
    "EXTRACTED", "UNCHANGED", "CHUNKED", "STORED", "SUPERSEDED", "FAILED")


class _Json:
    """To and from the camelCase JSON of the state machine and the work files;
    None fields are left out, unknown keys are kept (a Catch adds $.error)."""

    def to_json(self) -> dict:
        data = {camel_case(f.name): getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        return {**getattr(self, "extra", {}), **{k: v for k, v in data.items() if v is not None}}

    @classmethod
    def from_json(cls, data: dict):
        names = {camel_case(f.name): f.name for f in fields(cls) if f.name != "extra"}
        known = {names[k]: v for k, v in data.items() if k in names}
        if any(f.name == "extra" for f in fields(cls)):
            known["extra"] = {k: v for k, v in data.items() if k not in names}
        return cls(**known)


@dataclass
class Chunk(_Json):
    chunk_index: int
    content: str
    start_char: int
    end_char: int
    token_count: int
    page: Optional[int] = None
    headers: list = field(default_factory=list)
    metadata: dict = field(default_factory=dict)
    title: Optional[str] = None
    embedding: Optional[list[float]] = None


@dataclass
class Failure(_Json):
    code: str
    message: str


@dataclass
class RunState(_Json):
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
class BatchState(_Json):
    """One Embed Map iteration (the Map's ItemSelector builds it)."""
    batch_key: str
    document_id: str
    kb_id: str
    bucket: str
    run_id: str
