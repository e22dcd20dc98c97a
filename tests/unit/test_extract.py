import pytest

from chalicelib.ingestion.errors import IngestionError
from chalicelib.ingestion.extract import DOCX, HTML, MARKDOWN, PDF, TEXT, decode_text, extract, sniff_type


def test_type_is_sniffed_from_content_not_the_name(shared_docs):
    pdf = (shared_docs / "crazyones.pdf").read_bytes()
    assert sniff_type(pdf, "misnamed.txt") == PDF
    docx = (shared_docs / "par-known-paragraphs.docx").read_bytes()
    assert sniff_type(docx, "report.bin") == DOCX
    assert sniff_type(b"<!DOCTYPE html><html><body>x</body></html>", "page") == HTML
    assert sniff_type(b"# Title", "notes.md") == MARKDOWN
    assert sniff_type(b"plain words", "notes") == TEXT


def test_binary_content_is_unsupported():
    with pytest.raises(IngestionError) as err:
        extract(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "image.png")
    assert err.value.code == "UNSUPPORTED_TYPE"


def test_text_decoding_handles_utf16_bom_and_latin1():
    assert decode_text("héllo".encode("utf-16")) == "héllo"
    assert decode_text("héllo".encode("utf-8")) == "héllo"
    assert decode_text("héllo".encode("latin-1")) == "héllo"


def test_empty_text_fails_with_no_text():
    with pytest.raises(IngestionError) as err:
        extract(b"   \n\n  ", "empty.txt")
    assert err.value.code == "NO_TEXT"


def test_pdf_pages_are_numbered(shared_docs):
    extracted = extract((shared_docs / "Seige_of_Vicksburg_Sample_OCR.pdf").read_bytes(), "s.pdf")
    assert extracted.page_count == 6
    assert [s.page for s in extracted.sections] == list(range(1, 7))
    assert "VICKSBURG" in extracted.sections[0].text


def test_markdown_keeps_the_heading_path(shared_docs):
    extracted = extract((shared_docs / "pypdf-extract-text.md").read_bytes(), "p.md")
    paths = [s.headers for s in extracted.sections]
    assert ["Extract Text from a PDF"] in paths
    assert any(len(p) == 2 and p[0] == "Extract Text from a PDF" for p in paths)


def test_docx_headings(shared_docs):
    paragraphs = extract((shared_docs / "par-known-paragraphs.docx").read_bytes(), "p.docx")
    assert paragraphs.sections[-1].headers == ["Heading Paragraph"]
    assert "Normal paragraph" in paragraphs.sections[-1].text


def test_a_docx_whose_tables_are_all_empty_has_no_text(shared_docs):
    # tbl-having-tables.docx holds three tables and not one character of text.
    with pytest.raises(IngestionError) as err:
        extract((shared_docs / "tbl-having-tables.docx").read_bytes(), "t.docx")
    assert err.value.code == "NO_TEXT"


def _docx(build) -> bytes:
    import io

    import docx

    document = docx.Document()
    build(document)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def test_docx_tables_read_as_rows_and_headers_footers_appear_once():
    def build(document):
        document.sections[0].header.paragraphs[0].text = "ACME confidential"
        document.sections[0].footer.paragraphs[0].text = "Page footer"
        document.add_heading("Prices", level=1)
        table = document.add_table(rows=2, cols=2)
        for r, row in enumerate([("Item", "Price"), ("Tea", "3 EUR")]):
            for c, value in enumerate(row):
                table.cell(r, c).text = value
        document.add_heading("Terms", level=2)
        document.add_paragraph("Payment within 30 days.")
        document.add_section()  # a second section, linked to the first one's header

    extracted = extract(_docx(build), "prices.docx")
    text = "\n".join(s.text for s in extracted.sections)
    assert "Item | Price" in text and "Tea | 3 EUR" in text
    assert text.count("ACME confidential") == 1 and text.count("Page footer") == 1
    assert extracted.sections[-1].headers == ["Prices", "Terms"]


def test_a_zip_bomb_docx_is_refused_before_inflating():
    import io
    import zipfile

    from chalicelib.ingestion.extract import Limits

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("word/document.xml", b"<w:document/>")
        zf.writestr("word/media/bomb.bin", b"\0" * (20 * 1024 * 1024))
    assert len(out.getvalue()) < 100_000
    with pytest.raises(IngestionError) as err:
        extract(out.getvalue(), "bomb.docx", Limits(max_uncompressed_bytes=10 * 1024 * 1024))
    assert err.value.code == "UNCOMPRESSED_TOO_LARGE"



def test_an_office_file_whose_parts_fail_their_crc_is_corrupt_not_an_internal_error():
    """A lying zip (issue 33): the directory's CRC-32 does not match the part's bytes."""
    def build(document):
        document.add_paragraph("The pump is primed before its first start.")

    import io
    import zipfile

    stored = io.BytesIO()  # python-docx deflates its parts; stored, the text can be edited in place
    with zipfile.ZipFile(io.BytesIO(_docx(build))) as source, zipfile.ZipFile(stored, "w", zipfile.ZIP_STORED) as zf:
        for info in source.infolist():
            zf.writestr(info.filename, source.read(info))
    data = bytearray(stored.getvalue())
    extract(bytes(data), "pump.docx")  # whole, it reads
    start = data.find(b"primed")
    data[start:start + 6] = b"PRIMED"
    with pytest.raises(IngestionError) as err:
        extract(bytes(data), "pump.docx")
    assert err.value.code == "CORRUPT_FILE" and "damaged" in err.value.message

def _pdf(pages: int, password: str | None = None, user_password: str = "") -> bytes:
    import io

    from pypdf import PdfWriter

    writer = PdfWriter()
    for _ in range(pages):
        writer.add_blank_page(width=200, height=200)
    if password is not None:
        writer.encrypt(user_password=user_password, owner_password=password)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def test_pdf_limits_and_encryption(shared_docs):
    from pypdf import PdfReader, PdfWriter
    import io

    from chalicelib.ingestion.extract import Limits

    with pytest.raises(IngestionError) as err:
        extract(_pdf(3), "blank.pdf", Limits(max_pages=2))
    assert err.value.code == "TOO_MANY_PAGES"
    with pytest.raises(IngestionError) as err:
        extract(_pdf(1, password="owner", user_password="secret"), "locked.pdf")
    assert err.value.code == "ENCRYPTED"
    # An empty user password opens the file.
    writer = PdfWriter(clone_from=PdfReader(shared_docs / "crazyones.pdf"))
    writer.encrypt(user_password="", owner_password="owner")
    out = io.BytesIO()
    writer.write(out)
    assert "Crazy Ones" in extract(out.getvalue(), "open.pdf").sections[0].text


def test_a_corrupt_pdf_fails_with_its_code(shared_docs):
    data = (shared_docs / "crazyones.pdf").read_bytes()
    with pytest.raises(IngestionError) as err:
        extract(data[:200] + b"garbage" * 50, "broken.pdf")
    assert err.value.code in ("CORRUPT_FILE", "NO_TEXT")
    with pytest.raises(IngestionError) as err:
        extract(b"%PDF-1.7\n" + b"\x00\xff" * 100, "broken.pdf")
    assert err.value.code == "CORRUPT_FILE"


def test_html_drops_scripts_and_navigation_and_keeps_headings():
    html = b"""<html><head><style>p{}</style><script>var secret=1;</script></head><body>
    <nav>Home | About</nav><h1>Guide</h1><p>Intro text.</p><h2>Install</h2><p>Run it.</p></body></html>"""
    extracted = extract(html, "page.html")
    text = " ".join(s.text for s in extracted.sections)
    assert "secret" not in text and "Home | About" not in text
    assert extracted.sections[-1].headers == ["Guide", "Install"]
    assert "Run it." in extracted.sections[-1].text
