"""The records every reader returns, the content types, and what the readers share."""
import io
import zipfile
import zlib
from dataclasses import asdict, dataclass, field
from typing import Optional

from chalicelib.ingestion.errors import IngestionError

PDF = "application/pdf"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
HTML = "text/html"
TEXT = "text/plain"
MARKDOWN = "text/markdown"
RST = "text/x-rst"
ASCIIDOC = "text/asciidoc"
CSV = "text/csv"
TSV = "text/tab-separated-values"
JSON = "application/json"
YAML = "application/yaml"
TOML = "application/toml"
XML = "application/xml"
CONFIG = "text/x-config"  # .conf, .ini, .cfg, .properties, .env
# Source code, by language; chunked on definitions and blank lines like the configuration
# formats (chalicelib.ingestion.chunk reads LINE_STRUCTURED).
CODE_TYPES = {
    ".py": "text/x-python", ".pyi": "text/x-python", ".js": "text/javascript", ".mjs": "text/javascript",
    ".cjs": "text/javascript", ".jsx": "text/javascript", ".ts": "text/x-typescript",
    ".tsx": "text/x-typescript", ".go": "text/x-go", ".rs": "text/x-rust", ".java": "text/x-java",
    ".kt": "text/x-kotlin", ".kts": "text/x-kotlin", ".scala": "text/x-scala", ".c": "text/x-c",
    ".h": "text/x-c", ".cc": "text/x-c++", ".cpp": "text/x-c++", ".cxx": "text/x-c++", ".hpp": "text/x-c++",
    ".hh": "text/x-c++", ".cs": "text/x-csharp", ".rb": "text/x-ruby", ".php": "text/x-php",
    ".pl": "text/x-perl", ".pm": "text/x-perl", ".sh": "text/x-shellscript", ".bash": "text/x-shellscript",
    ".zsh": "text/x-shellscript", ".swift": "text/x-swift", ".lua": "text/x-lua", ".r": "text/x-r",
    ".sql": "text/x-sql", ".m": "text/x-objc", ".ex": "text/x-elixir", ".exs": "text/x-elixir",
    ".erl": "text/x-erlang", ".hs": "text/x-haskell", ".ml": "text/x-ocaml", ".clj": "text/x-clojure",
    ".dart": "text/x-dart", ".vue": "text/x-vue", ".css": "text/css", ".scss": "text/x-scss",
    ".mk": "text/x-makefile", ".cmake": "text/x-cmake", ".tf": "text/x-terraform", ".ps1": "text/x-powershell",
}
# Files named without an extension that are code all the same.
CODE_NAMES = {"makefile": "text/x-makefile", "gnumakefile": "text/x-makefile", "dockerfile": "text/x-dockerfile",
              "cmakelists.txt": "text/x-cmake", "rakefile": "text/x-ruby", "gemfile": "text/x-ruby",
              "jenkinsfile": "text/x-groovy", "vagrantfile": "text/x-ruby"}
SCRIPT_TYPES = {"python": "text/x-python", "sh": "text/x-shellscript", "bash": "text/x-shellscript",
                "dash": "text/x-shellscript", "zsh": "text/x-shellscript", "perl": "text/x-perl",
                "ruby": "text/x-ruby", "node": "text/javascript"}
# Chunked on lines, definitions and blank lines rather than on sentences.
LINE_STRUCTURED = frozenset(CODE_TYPES.values()) | frozenset(CODE_NAMES.values()) | frozenset(
    SCRIPT_TYPES.values()) | {JSON, YAML, TOML, XML, CONFIG}
# Each section's first line is the table's header row, repeated in each of its chunks.
TABLES = frozenset({CSV, TSV, XLSX})


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
