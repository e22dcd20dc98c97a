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


def test_docx_headings_and_tables(shared_docs):
    paragraphs = extract((shared_docs / "par-known-paragraphs.docx").read_bytes(), "p.docx")
    assert paragraphs.sections[-1].headers == ["Heading Paragraph"]
    tables = extract((shared_docs / "tbl-having-tables.docx").read_bytes(), "t.docx")
    assert " | " in tables.sections[0].text


def test_html_drops_scripts_and_navigation_and_keeps_headings():
    html = b"""<html><head><style>p{}</style><script>var secret=1;</script></head><body>
    <nav>Home | About</nav><h1>Guide</h1><p>Intro text.</p><h2>Install</h2><p>Run it.</p></body></html>"""
    extracted = extract(html, "page.html")
    text = " ".join(s.text for s in extracted.sections)
    assert "secret" not in text and "Home | About" not in text
    assert extracted.sections[-1].headers == ["Guide", "Install"]
    assert "Run it." in extracted.sections[-1].text
