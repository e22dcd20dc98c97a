"""CSV and XLSX: one table a section (a sheet's headers are [its name]), one row a line
with its cells joined by " | ", the header row first. The chunker repeats that first
line at the head of each of the section's chunks."""
import csv
import datetime
import io

from chalicelib.ingestion.errors import IngestionError
from chalicelib.ingestion.formats.base import Extracted, Format, Section, check_uncompressed_size, decode_text

XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
CSV = "text/csv"
TSV = "text/tab-separated-values"

CELL_SEPARATOR = " | "


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    return " ".join(str(value).split())  # a row stays one line


def _rows_text(rows) -> str:
    lines = []
    for row in rows:
        cells = [_cell(v) for v in row]
        while cells and not cells[-1]:
            cells.pop()
        if cells:
            lines.append(CELL_SEPARATOR.join(cells))
    return "\n".join(lines)


def read_csv(data: bytes, content_type: str) -> Extracted:
    text = decode_text(data)
    if content_type == TSV:
        dialect = csv.excel_tab
    else:
        try:
            dialect = csv.Sniffer().sniff(text[:20_000], delimiters=",;\t|")
        except csv.Error:
            dialect = csv.excel
    try:
        rows = list(csv.reader(io.StringIO(text, newline=""), dialect))
    except csv.Error as exc:
        raise IngestionError("CORRUPT_FILE", f"the CSV could not be read: {exc}") from exc
    return Extracted(content_type, [Section(_rows_text(rows))])


def read_xlsx(data: bytes, limits) -> Extracted:
    import openpyxl

    check_uncompressed_size(data, limits.max_uncompressed_bytes, "XLSX")
    try:
        # read_only streams the rows; data_only reads the values formulas last computed.
        book = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except Exception as exc:  # openpyxl raises KeyError, ValueError, lxml and zipfile errors
        raise IngestionError("CORRUPT_FILE", f"the XLSX could not be read: {exc}") from exc
    try:
        sections = [Section(_rows_text(sheet.iter_rows(values_only=True)), headers=[sheet.title])
                    for sheet in book.worksheets if hasattr(sheet, "iter_rows")]
    finally:
        book.close()
    return Extracted(XLSX, sections)


FORMATS = (
    Format("XLSX", (XLSX,), lambda data, _type, limits: read_xlsx(data, limits), library="openpyxl",
           notes="rows, one sheet a section, the header row at the top of every chunk",
           extensions={".xlsx": XLSX}, zip_member="xl/workbook.xml", chunking="table"),
    Format("CSV, TSV", (CSV, TSV), lambda data, content_type, _limits: read_csv(data, content_type),
           notes="rows, the header row at the top of every chunk",
           extensions={".csv": CSV, ".tsv": TSV, ".tab": TSV}, chunking="table"),
)
