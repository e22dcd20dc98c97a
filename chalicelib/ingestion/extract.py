"""Text extraction. The type is sniffed from the bytes, the name only tells text
formats apart (chalicelib.ingestion.formats.sniff); the format registry
(formats/registry.py) gives the reader. Output: sections of text, each with its page and
heading trail."""
from chalicelib.ingestion.errors import IngestionError
from chalicelib.ingestion.formats.base import Extracted, Limits, Section, decode_text
from chalicelib.ingestion.formats.docx import DOCX
from chalicelib.ingestion.formats.html import HTML
from chalicelib.ingestion.formats.jsontext import JSON
from chalicelib.ingestion.formats.pdf import PDF
from chalicelib.ingestion.formats.registry import LINE_STRUCTURED, TABLES, format_of
from chalicelib.ingestion.formats.sniff import HEAD_BYTES, refused_by_content, refused_by_name, sniff_type
from chalicelib.ingestion.formats.tables import CSV, TSV, XLSX
from chalicelib.ingestion.formats.text import (ASCIIDOC, CODE_TYPES, CONFIG, MARKDOWN, RST, TEXT, TOML, XML,
                                               YAML)

# What the pipeline, the chunker and the upload API read from here.
__all__ = ["extract", "sniff_type", "refused_by_name", "refused_by_content", "HEAD_BYTES", "decode_text",
           "Extracted", "Section", "Limits", "LINE_STRUCTURED", "TABLES", "CODE_TYPES", "PDF", "DOCX", "XLSX",
           "HTML", "TEXT", "MARKDOWN", "RST", "ASCIIDOC", "CSV", "TSV", "JSON", "YAML", "TOML", "XML", "CONFIG"]


def extract(data: bytes, filename: str, limits: Limits = Limits()) -> Extracted:
    content_type = sniff_type(data, filename)
    extracted = format_of(content_type).read(data, content_type, limits)
    for section in extracted.sections:  # PostgreSQL text cannot hold NUL
        section.text = section.text.replace("\x00", "")
    extracted.sections = [s for s in extracted.sections if s.text.strip()]
    if not extracted.sections and not extracted.note:
        raise IngestionError("NO_TEXT", f"{filename}: no text could be extracted")
    return extracted
