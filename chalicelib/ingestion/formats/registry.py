"""Every file format the service reads, one entry each (base.Format): a new format is its
module in this package, with its reader and its FORMATS, and its line in MODULES. Sniffing
(sniff.py), extraction (extract.py), the chunker's choice of cut and the formats table of
the documentation all read this list."""
from chalicelib.ingestion.formats import docx, html, jsontext, pdf, tables, text
from chalicelib.ingestion.formats.base import Format

# One line a format module, in the order sniffing asks them; text.py last, as its last
# format (plain text) takes the text no other names.
MODULES = (
    pdf,
    docx,
    tables,
    jsontext,
    html,
    text,
)

FORMATS: tuple[Format, ...] = tuple(f for module in MODULES for f in module.FORMATS)
DEFAULT = FORMATS[-1]
BY_TYPE: dict[str, Format] = {t: f for f in FORMATS for t in f.content_types}
# Recognised from their bytes, before any text rule.
BINARY = tuple(f for f in FORMATS if f.magic is not None or f.zip_member is not None)
ZIP_MEMBERS = {f.zip_member: f.content_types[0] for f in FORMATS if f.zip_member}
# What names a text file's format: its extension, its whole name, its #! interpreter.
TEXT_EXTENSIONS = {ext: t for f in FORMATS if f not in BINARY for ext, t in f.extensions.items()}
FILE_NAMES = {name: t for f in FORMATS for name, t in f.file_names.items()}
INTERPRETERS = {name: t for f in FORMATS for name, t in f.interpreters.items()}
# Chunked on lines, definitions and blank lines rather than on sentences.
LINE_STRUCTURED = frozenset(t for f in FORMATS if f.chunking == "lines" for t in f.content_types)
# Each section's first line is the table's header row, repeated in each of its chunks.
TABLES = frozenset(t for f in FORMATS if f.chunking == "table" for t in f.content_types)


def format_of(content_type: str) -> Format:
    """The format a sniffed content type is read as (plain text for one no format names)."""
    return BY_TYPE.get(content_type, DEFAULT)


def formats_table() -> str:
    """The formats table of the documentation (docs/ingestion.md), as Markdown, from the
    registry: a format a row, with what names it, what reads it and what it keeps."""
    rows = ["| format | recognised by | read with | what is kept |", "|---|---|---|---|"]
    for f in FORMATS:
        notes = f.notes.replace("|", "\\|")
        rows.append(f"| {f.name} | {_recognised(f)} | {f.library or 'the standard library'} | {notes} |")
    return "\n".join(rows) + "\n"


def _recognised(f: Format) -> str:
    if f.magic is not None:
        return "its first bytes"
    if f.zip_member is not None:
        return f"its ZIP package (`{f.zip_member}`)"
    named = sorted(f.extensions)
    shown = ", ".join(f"`{e}`" for e in named[:6]) + (f" and {len(named) - 6} more" if len(named) > 6 else "")
    ways = [shown] if named else []
    if f.looks_like is not None:
        ways.insert(0, "its first bytes")
    if f.file_names:
        ways.append("names such as `Makefile`")
    if f.interpreters:
        ways.append("a `#!` line")
    if f is DEFAULT:
        ways.append("any other text")
    return ", ".join(ways)
