"""PDF: one section a page, without the running headers, footers and page numbers."""
import io
import re
from collections import Counter

from chalicelib.ingestion.errors import IngestionError
from chalicelib.ingestion.formats.base import Extracted, Format, Section

PDF = "application/pdf"

# Running lines are looked for among the first and last few lines of each page: a header
# or footer is one or two lines, and pypdf may order a page's margins after its body.
EDGE_LINES = 3
# A line is running when it is at an edge of more than half the pages with text, and of
# at least this many: with fewer pages, a repeated line is as likely to be content.
MIN_PAGES = 3
_DIGITS = re.compile(r"\d+")


def _shape(line: str) -> str:
    """Page 3 of 10, Page 4 of 10 ... are one shape: digits do not count."""
    return _DIGITS.sub("#", " ".join(line.split()).lower())


def _edges(lines: list[str]) -> list[int]:
    """Indexes of the first and last few non-blank lines: EDGE_LINES, fewer on a short
    page, whose body must not be taken for its margins."""
    filled = [i for i, line in enumerate(lines) if line.strip()]
    k = max(1, min(EDGE_LINES, len(filled) // 3))
    return sorted(set(filled[:k] + filled[-k:]))


def strip_running_lines(pages: list[str]) -> list[str]:
    split = [page.splitlines() for page in pages]
    with_text = [lines for lines in split if any(line.strip() for line in lines)]
    if len(with_text) < MIN_PAGES:
        return pages
    counts = Counter()
    for lines in with_text:
        counts.update({_shape(lines[i]) for i in _edges(lines)})
    running = {shape for shape, n in counts.items() if shape and n * 2 > len(with_text)}
    if not running:
        return pages
    cleaned = []
    for lines in split:
        drop = {i for i in _edges(lines) if _shape(lines[i]) in running}
        cleaned.append("\n".join(line for i, line in enumerate(lines) if i not in drop))
    return cleaned


def read_pdf(data: bytes, max_pages: int) -> Extracted:
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
    pages = strip_running_lines(pages)
    return Extracted(PDF, [Section(text, page=i + 1) for i, text in enumerate(pages)], len(pages))


FORMATS = (Format("PDF", (PDF,), lambda data, _type, limits: read_pdf(data, limits.max_pages), library="pypdf",
                  notes="the page number on every chunk; an empty user password is tried; lines repeated at the"
                        " top or bottom of most pages (running headers, footers, page numbers) removed",
                  extensions={".pdf": PDF}, magic=lambda data: b"%PDF-" in data[:1024]),)
