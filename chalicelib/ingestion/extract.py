"""Text extraction. The type is sniffed from the bytes, the name only tells text
formats apart (chalicelib.ingestion.formats.sniff). Output: sections of text, each with
its page and heading trail; one module of chalicelib.ingestion.formats per format."""
from chalicelib.ingestion.errors import IngestionError
from chalicelib.ingestion.formats import docx, html, jsontext, pdf, tables, text
from chalicelib.ingestion.formats.base import (ASCIIDOC, CODE_TYPES, CONFIG, CSV, DOCX, HTML, JSON,  # noqa: F401
                                               LINE_STRUCTURED, MARKDOWN, PDF, RST, TABLES, TEXT, TOML, TSV,
                                               XLSX, XML, YAML, Extracted, Limits, Section, decode_text)
from chalicelib.ingestion.formats.sniff import (HEAD_BYTES, refused_by_content, refused_by_name,  # noqa: F401
                                                sniff_type)

# What the pipeline, the chunker and the upload API read from here.
__all__ = ["extract", "sniff_type", "refused_by_name", "refused_by_content", "HEAD_BYTES", "decode_text",
           "Extracted", "Section", "Limits", "LINE_STRUCTURED", "TABLES", "CODE_TYPES", "PDF", "DOCX", "XLSX",
           "HTML", "TEXT", "MARKDOWN", "RST", "ASCIIDOC", "CSV", "TSV", "JSON", "YAML", "TOML", "XML", "CONFIG"]


def extract(data: bytes, filename: str, limits: Limits = Limits()) -> Extracted:
    content_type = sniff_type(data, filename)
    if content_type == PDF:
        extracted = pdf.read_pdf(data, limits.max_pages)
    elif content_type == DOCX:
        extracted = docx.read_docx(data, limits)
    elif content_type == XLSX:
        extracted = tables.read_xlsx(data, limits)
    elif content_type in (CSV, TSV):
        extracted = tables.read_csv(data, content_type)
    elif content_type == JSON:
        extracted = jsontext.read_json(data)
    elif content_type == HTML:
        extracted = html.read_html(data)
    elif content_type == MARKDOWN:
        extracted = text.read_markdown(data)
    elif content_type == RST:
        extracted = text.read_rst(data)
    elif content_type == ASCIIDOC:
        extracted = text.read_asciidoc(data)
    else:  # plain text, source code, configuration
        extracted = text.read_plain(data, content_type)
    for section in extracted.sections:  # PostgreSQL text cannot hold NUL
        section.text = section.text.replace("\x00", "")
    extracted.sections = [s for s in extracted.sections if s.text.strip()]
    if not extracted.sections and not extracted.note:
        raise IngestionError("NO_TEXT", f"{filename}: no text could be extracted")
    return extracted
