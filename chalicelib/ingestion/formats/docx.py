"""DOCX: headings (the Heading N styles) become sections; tables read as rows; each
distinct page header and footer once."""
import io

from chalicelib.ingestion.errors import IngestionError
from chalicelib.ingestion.formats.base import Extracted, Format, SectionBuilder, check_uncompressed_size

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


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


def read_docx(data: bytes, limits) -> Extracted:
    import docx

    check_uncompressed_size(data, limits.max_uncompressed_bytes, "DOCX")
    try:
        document = docx.Document(io.BytesIO(data))
    except Exception as exc:  # python-docx raises bare KeyError/ValueError/lxml errors
        raise IngestionError("CORRUPT_FILE", f"the DOCX could not be read: {exc}") from exc
    page_headers, page_footers = _header_footer_lines(document)
    out = SectionBuilder(page_headers)
    for block in document.element.body.iterchildren():
        tag = block.tag.rsplit("}", 1)[-1]
        if tag == "p":
            para = docx.text.paragraph.Paragraph(block, document)
            style = (para.style.name if para.style is not None else "") or ""
            if style.startswith("Heading") and para.text.strip():
                level = int(style.split()[-1]) if style.split()[-1].isdigit() else 1
                out.heading(level, para.text.strip())
            elif para.text.strip():
                out.lines.append(para.text)
        elif tag == "tbl":
            table = docx.table.Table(block, document)
            for row in table.rows:
                cells = []
                for cell in row.cells:  # merged cells repeat; keep each once
                    text = cell.text.strip()
                    if not cells or cells[-1] != text:
                        cells.append(text)
                out.lines.append(" | ".join(cells))
    return Extracted(DOCX, out.finish(page_footers))


FORMATS = (Format("DOCX", (DOCX,), lambda data, _type, limits: read_docx(data, limits), library="python-docx",
                  notes="headings as sections, tables as `a | b` rows, headers and footers once",
                  extensions={".docx": DOCX}, zip_member="word/document.xml"),)
