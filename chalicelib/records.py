"""Typed records that more than one layer passes on: the pipeline's Chunk, which
ingestion cuts and embeds and storage writes, kept below both."""
import time
from dataclasses import dataclass, field, fields
from typing import Optional

from chalicelib.validate import camel_case


class JsonRecord:
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


@dataclass(frozen=True)
class StepClock:
    """A pipeline step and when it began (time.monotonic()): its time so far, read by the
    transaction that makes the document PROCESSED, so a client never reads PROCESSED
    before the time of the step that set it."""
    step: str
    started: float

    def millis(self) -> int:
        return int((time.monotonic() - self.started) * 1000)


@dataclass
class Chunk(JsonRecord):
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
