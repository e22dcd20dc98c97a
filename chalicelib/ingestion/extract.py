"""Text extraction. The type is sniffed from the bytes, the name only breaks ties
between text formats. Output: sections of text, each with its page and heading path."""
import io
import re
import zipfile
from dataclasses import asdict, dataclass, field
from html.parser import HTMLParser
from typing import Optional

from chalicelib.ingestion.errors import IngestionError

PDF, DOCX, MARKDOWN, HTML, TEXT = ("application/pdf",
                                   "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
                                   "text/markdown", "text/html", "text/plain")


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

    def to_dict(self) -> dict:
        return {"contentType": self.content_type, "pageCount": self.page_count,
                "sections": [asdict(s) for s in self.sections]}

    @staticmethod
    def from_dict(data: dict) -> "Extracted":
        return Extracted(data["contentType"], [Section(**s) for s in data["sections"]], data.get("pageCount"))


def sniff_type(data: bytes, filename: str) -> str:
    name = filename.lower()
    if data.startswith(b"%PDF-"):
        return PDF
    if data.startswith(b"PK\x03\x04"):
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as zf:
                if "word/document.xml" in zf.namelist():
                    return DOCX
        except zipfile.BadZipFile:
            pass
        raise IngestionError("UNSUPPORTED_TYPE", f"{filename}: a ZIP archive that is not a DOCX document")
    if b"\x00" in data[:4096] and not data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise IngestionError("UNSUPPORTED_TYPE", f"{filename}: binary content of an unsupported type")
    head = data[:512].lstrip().lower()
    if name.endswith((".html", ".htm")) or head.startswith((b"<!doctype html", b"<html")):
        return HTML
    if name.endswith((".md", ".markdown")):
        return MARKDOWN
    return TEXT


def decode_text(data: bytes) -> str:
    """UTF-8 (with or without BOM), UTF-16 with BOM, else Latin-1, which never fails."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")


@dataclass(frozen=True)
class Limits:
    max_pages: int = 5000
    max_uncompressed_bytes: int = 512 * 1024 * 1024


def extract(data: bytes, filename: str, limits: Limits = Limits()) -> Extracted:
    content_type = sniff_type(data, filename)
    if content_type == PDF:
        extracted = _extract_pdf(data, limits.max_pages)
    elif content_type == DOCX:
        _check_uncompressed_size(data, limits.max_uncompressed_bytes)
        extracted = _extract_docx(data)
    else:
        extracted = {MARKDOWN: _extract_markdown, HTML: _extract_html, TEXT: _extract_text}[content_type](data)
    for section in extracted.sections:  # PostgreSQL text cannot hold NUL
        section.text = section.text.replace("\x00", "")
    extracted.sections = [s for s in extracted.sections if s.text.strip()]
    if not extracted.sections:
        raise IngestionError("NO_TEXT", f"{filename}: no text could be extracted")
    return extracted


def _extract_text(data: bytes) -> Extracted:
    return Extracted(TEXT, [Section(decode_text(data))])


_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def _extract_markdown(data: bytes) -> Extracted:
    sections, path, lines = [], [], []
    in_fence = False
    for line in decode_text(data).splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
        match = None if in_fence else _HEADING.match(line)
        if match:
            sections.append(Section("\n".join(lines), headers=list(path)))
            level = len(match.group(1))
            path = path[: level - 1] + [match.group(2)]
            lines = [match.group(2)]
        else:
            lines.append(line)
    sections.append(Section("\n".join(lines), headers=list(path)))
    return Extracted(MARKDOWN, sections)


def _extract_pdf(data: bytes, max_pages: int) -> Extracted:
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data))
        # An empty user password opens many "protected" PDFs; decrypt returns 0 when it does not.
        if reader.is_encrypted and not reader.decrypt(""):
            raise IngestionError("ENCRYPTED", "the PDF is encrypted and needs a password")
        if len(reader.pages) > max_pages:
            raise IngestionError("TOO_MANY_PAGES",
                                 f"the PDF has {len(reader.pages)} pages; the limit is {max_pages}")
        pages = [page.extract_text() or "" for page in reader.pages]
    except IngestionError:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
        raise IngestionError("CORRUPT_FILE", f"the PDF could not be read: {exc}") from exc
    return Extracted(PDF, [Section(text, page=i + 1) for i, text in enumerate(pages)], len(pages))


def _check_uncompressed_size(data: bytes, limit: int) -> None:
    """Refuse a zip bomb before anything inflates it: the sizes come from the
    archive's directory, and inflation stops anyway once the limit is passed."""
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        declared = sum(info.file_size for info in zf.infolist())
        if declared > limit:
            raise IngestionError("UNCOMPRESSED_TOO_LARGE",
                                 f"the DOCX would inflate to {declared} bytes; the limit is {limit}")
        total = 0
        for info in zf.infolist():
            with zf.open(info) as part:
                while chunk := part.read(1 << 20):
                    total += len(chunk)
                    if total > limit:
                        raise IngestionError("UNCOMPRESSED_TOO_LARGE",
                                             f"the DOCX inflates past {limit} bytes")


def _header_footer_lines(document) -> tuple[list[str], list[str]]:
    """Each distinct header and footer text once, however many sections repeat it."""
    headers, footers = [], []
    for section in document.sections:
        for part, bucket in ((section.header, headers), (section.footer, footers)):
            if part.is_linked_to_previous:
                continue
            text = "\n".join(p.text for p in part.paragraphs if p.text.strip())
            if text and text not in bucket:
                bucket.append(text)
    return headers, footers


def _extract_docx(data: bytes) -> Extracted:
    import docx

    try:
        document = docx.Document(io.BytesIO(data))
    except Exception as exc:  # python-docx raises bare KeyError/ValueError/lxml errors
        raise IngestionError("CORRUPT_FILE", f"the DOCX could not be read: {exc}") from exc
    page_headers, page_footers = _header_footer_lines(document)
    sections, path = [], []
    lines = list(page_headers)
    for block in document.element.body.iterchildren():
        tag = block.tag.rsplit("}", 1)[-1]
        if tag == "p":
            para = docx.text.paragraph.Paragraph(block, document)
            style = (para.style.name if para.style is not None else "") or ""
            if style.startswith("Heading") and para.text.strip():
                level = int(style.split()[-1]) if style.split()[-1].isdigit() else 1
                sections.append(Section("\n".join(lines), headers=list(path)))
                path = path[: level - 1] + [para.text.strip()]
                lines = [para.text.strip()]
            elif para.text.strip():
                lines.append(para.text)
        elif tag == "tbl":
            table = docx.table.Table(block, document)
            for row in table.rows:
                cells = []
                for cell in row.cells:  # merged cells repeat; keep each once
                    text = cell.text.strip()
                    if not cells or cells[-1] != text:
                        cells.append(text)
                lines.append(" | ".join(cells))
    sections.append(Section("\n".join(lines + page_footers), headers=list(path)))
    return Extracted(DOCX, sections)


class _HtmlText(HTMLParser):
    SKIP = {"script", "style", "nav", "noscript", "template", "header", "footer", "aside"}
    BLOCK = {"p", "div", "li", "br", "tr", "section", "article", "pre", "blockquote", "table"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: list[Section] = []
        self.path: list[str] = []
        self.parts: list[str] = []
        self.skip_depth = 0
        self.heading_level: Optional[int] = None
        self.heading_text: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in self.SKIP:
            self.skip_depth += 1
        elif re.fullmatch(r"h[1-6]", tag) and not self.skip_depth:
            self.heading_level, self.heading_text = int(tag[1]), []
        elif tag in self.BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        if tag in self.SKIP:
            self.skip_depth = max(0, self.skip_depth - 1)
        elif self.heading_level and tag == f"h{self.heading_level}":
            title = " ".join("".join(self.heading_text).split())
            self.sections.append(Section("".join(self.parts), headers=list(self.path)))
            self.path = self.path[: self.heading_level - 1] + [title]
            self.parts, self.heading_level = [title + "\n"], None
        elif tag in self.BLOCK:
            self.parts.append("\n")

    def handle_data(self, data):
        if self.skip_depth:
            return
        (self.heading_text if self.heading_level else self.parts).append(data)

    def finish(self) -> list[Section]:
        self.sections.append(Section("".join(self.parts), headers=list(self.path)))
        for s in self.sections:
            s.text = re.sub(r"\n\s*\n+", "\n\n", re.sub(r"[ \t]+", " ", s.text)).strip()
        return self.sections


def _extract_html(data: bytes) -> Extracted:
    parser = _HtmlText()
    parser.feed(decode_text(data))
    parser.close()
    return Extracted(HTML, parser.finish())
