"""The records every reader returns, the record that describes a format, and what the
readers share."""
import io
import zipfile
import zlib
from dataclasses import asdict, dataclass, field
from typing import Callable, Mapping, Optional

from chalicelib.ingestion.errors import IngestionError

@dataclass(frozen=True)
class Format:
    """One file format as the registry (formats/registry.py) lists it: how a file of it is
    recognised, the reader that reads it and the content types it is read as. A reader is
    called as read(data, content_type, limits) and returns an Extracted.

    Recognised, in the registry's order: by `magic` (its first bytes, before anything is
    refused: PDF), by `zip_member` (an Office Open XML package holding that part), then, for
    text, by `looks_like` (HTML's head), by a file name without extension (`file_names`:
    Makefile), by its extension (`extensions`), by the interpreter its #! line names
    (`interpreters`); text nothing names is the registry's last format's."""
    name: str  # as the formats table names it
    content_types: tuple[str, ...]  # the types it is read as; the first is the format's own
    read: Callable[[bytes, str, "Limits"], "Extracted"]
    library: Optional[str] = None  # what reads it, where not the standard library
    notes: str = ""  # what the reader keeps, for the formats table
    extensions: Mapping[str, str] = field(default_factory=dict)  # ".md" -> its content type
    file_names: Mapping[str, str] = field(default_factory=dict)  # "makefile" -> its content type
    interpreters: Mapping[str, str] = field(default_factory=dict)  # "python" (from #!) -> its content type
    magic: Optional[Callable[[bytes], bool]] = None
    zip_member: Optional[str] = None
    looks_like: Optional[Callable[[bytes], bool]] = None
    # How the chunker cuts it: "prose" (sentences), "lines" (definitions and blank lines),
    # "table" (rows, each chunk headed by the header row).
    chunking: str = "prose"


@dataclass
class Section:
    text: str
    page: Optional[int] = None
    headers: list[str] = field(default_factory=list)


@dataclass
class Extracted:
    content_type: str
    sections: list[Section]
    page_count: Optional[int] = None
    title: Optional[str] = None  # the document's own, where its format has one (HTML's <title>)
    # Why a document with nothing to index is not a failure (a page of navigation alone):
    # it is PROCESSED with no chunks, and its view shows this.
    note: Optional[str] = None

    def to_dict(self) -> dict:
        return {"contentType": self.content_type, "pageCount": self.page_count, "title": self.title,
                "sections": [asdict(s) for s in self.sections], "note": self.note}

    @staticmethod
    def from_dict(data: dict) -> "Extracted":
        return Extracted(data["contentType"], [Section(**s) for s in data["sections"]], data.get("pageCount"),
                         title=data.get("title"), note=data.get("note"))


@dataclass(frozen=True)
class Limits:
    max_pages: int = 5000
    max_uncompressed_bytes: int = 512 * 1024 * 1024


def decode_text(data: bytes) -> str:
    """UTF-8 (with or without BOM), UTF-16 with BOM, else Latin-1, which never fails."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")


class Outline:
    """The heading trail: a heading closes every open one of its level or deeper."""

    def __init__(self) -> None:
        self._open: list[tuple[int, str]] = []

    def enter(self, level: int, title: str) -> None:
        while self._open and self._open[-1][0] >= level:
            self._open.pop()
        self._open.append((level, title))

    @property
    def trail(self) -> list[str]:
        return [title for _, title in self._open]


class SectionBuilder:
    """Collects lines into sections; a heading starts a new one whose text begins with it."""

    def __init__(self, first_lines: Optional[list[str]] = None) -> None:
        self.sections: list[Section] = []
        self.outline = Outline()
        self.lines: list[str] = list(first_lines or [])
        self._before_heading: Optional[list] = None

    def heading(self, level: int, title: str) -> None:
        self.close()
        self._before_heading = list(self.outline._open)
        self.outline.enter(level, title)
        self.lines = [title]

    def retract_heading(self) -> None:
        """Takes back the last heading while nothing follows it (a table of contents'
        title whose list was dropped), so that it heads nothing."""
        if self._before_heading is not None and len(self.lines) == 1 and self.sections:
            self.lines = self.sections.pop().text.split("\n")
            self.outline._open = self._before_heading
        self._before_heading = None

    def close(self) -> None:
        self.sections.append(Section("\n".join(self.lines), headers=self.outline.trail))
        self.lines = []

    def finish(self, last_lines: Optional[list[str]] = None) -> list[Section]:
        self.lines += last_lines or []
        self.close()
        return self.sections


def check_uncompressed_size(data: bytes, limit: int, kind: str) -> None:
    """Refuse a zip bomb before anything inflates it: the sizes come from the
    archive's directory, and inflation stops anyway once the limit is passed. Reading every
    part whole also checks its CRC-32: an archive that lies about its contents is
    CORRUPT_FILE here, not an INTERNAL_ERROR in the reader later (issue 33)."""
    try:
        _inflate_within(data, limit, kind)
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as exc:
        raise IngestionError("CORRUPT_FILE", f"the {kind} is a damaged archive: {exc}") from exc


def _inflate_within(data: bytes, limit: int, kind: str) -> None:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        declared = sum(info.file_size for info in zf.infolist())
        if declared > limit:
            raise IngestionError("UNCOMPRESSED_TOO_LARGE",
                                 f"the {kind} would inflate to {declared} bytes; the limit is {limit}")
        total = 0
        for info in zf.infolist():
            with zf.open(info) as part:
                while chunk := part.read(1 << 20):
                    total += len(chunk)
                    if total > limit:
                        raise IngestionError("UNCOMPRESSED_TOO_LARGE", f"the {kind} inflates past {limit} bytes")
