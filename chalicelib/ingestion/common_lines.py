"""Lines repeated across many documents of one knowledge base (a footer "Part of the …
suite", a copyright line, a navigation strip that survived extraction) are dropped from
the chunks, as a PDF's running headers are within one document (formats/pdf.py). The
Chunk step records the document's lines (storage/kb_lines.py) and drops those that at
least MIN_DOCUMENTS and COMMON_SHARE of the knowledge base's documents hold. A document
chunked before a line became common keeps it until it is ingested again or the knowledge
base is rebuilt."""
import hashlib
import math
from dataclasses import replace

from chalicelib.ingestion.extract import LINE_STRUCTURED, TABLES, Extracted
from chalicelib.storage.kb_lines import DOCUMENTS

# A line held by fewer documents is as likely to be content (the same sentence in three
# release notes). On Debian's sqlite3-doc (767 pages) the navigation strip's lines are in
# 73 pages and the release notes' footer in 225, while a paragraph copied from one release's
# notes into the next patch releases' is in 8 at most.
MIN_DOCUMENTS = 3
COMMON_SHARE = 0.05
# A line of fewer words is a heading or a list term ("Parameters:", "Returns"), which
# documents share without being boilerplate, or code ("});"). A line of more is a paragraph:
# footers and navigation strips are shorter, and kb_lines stays small (a row a distinct line).
MIN_WORDS = 3
MAX_WORDS = 40


def _shape(line: str) -> str:
    return " ".join(line.split()).lower()


def _hash(shape: str) -> int:
    """A signed 64-bit hash (bigint); never DOCUMENTS."""
    value = int.from_bytes(hashlib.blake2b(shape.encode(), digest_size=8).digest(), "big", signed=True)
    return value or 1


def _considered(extracted: Extracted) -> bool:
    return extracted.content_type not in LINE_STRUCTURED and extracted.content_type not in TABLES


def _lines(extracted: Extracted):
    """(section index, line index, hash) of each line that may be common: prose of
    MIN_WORDS to MAX_WORDS words, not a section's heading."""
    for s, section in enumerate(extracted.sections):
        heading = section.headers[-1] if section.headers else None
        for i, line in enumerate(section.text.split("\n")):
            shape = _shape(line)
            if not MIN_WORDS <= shape.count(" ") + 1 <= MAX_WORDS or (i == 0 and line.strip() == heading):
                continue
            yield s, i, _hash(shape)


def line_hashes(extracted: Extracted) -> list[int]:
    """The document's distinct lines as kb_lines counts them, DOCUMENTS among them, sorted."""
    found = {h for *_, h in _lines(extracted)} if _considered(extracted) else set()
    return sorted(found | {DOCUMENTS})


def threshold(documents: int) -> int:
    """How many documents of a knowledge base of this many must hold a line for it to go."""
    return max(MIN_DOCUMENTS, math.ceil(COMMON_SHARE * documents))


def common(counts: dict[int, int]) -> set[int]:
    """The lines to drop, from kb_lines.counts (DOCUMENTS: the documents counted)."""
    at_least = threshold(counts.get(DOCUMENTS, 0))
    return {h for h, n in counts.items() if h != DOCUMENTS and n >= at_least}


def without(extracted: Extracted, dropped: set[int]) -> Extracted:
    """The document without its common lines."""
    if not dropped or not _considered(extracted):
        return extracted
    gone: dict[int, set[int]] = {}
    for s, i, h in _lines(extracted):
        if h in dropped:
            gone.setdefault(s, set()).add(i)
    if not gone:
        return extracted
    sections = []
    for s, section in enumerate(extracted.sections):
        if s in gone:
            kept = [line for i, line in enumerate(section.text.split("\n")) if i not in gone[s]]
            section = replace(section, text="\n".join(kept).strip())
        sections.append(section)
    return replace(extracted, sections=[s for s in sections if s.text.strip()])
