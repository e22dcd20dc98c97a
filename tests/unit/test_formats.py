"""Issue 27: every text format, and the main content only."""
import io
import json
import socket

import pytest

from chalicelib.ingestion.chunk import SECTION_SEPARATOR, chunk_document
from chalicelib.ingestion.errors import IngestionError
from chalicelib.ingestion.extract import (CSV, JSON, RST, TEXT, XLSX, Extracted, Limits, extract,
                                          refused_by_content, refused_by_name, sniff_type)
from tests.conftest import ROOT


def _document_text(extracted) -> str:
    return SECTION_SEPARATOR.join(s.text for s in extracted.sections)


def test_text_without_a_known_extension_is_ingested_as_text():
    readme = b"Frobnicator\n===========\n\nThis package frobnicates widgets.\nSee BUGS for known problems.\n"
    for name in ("README", "BUGS", "copyright", "LICENSE", "server.conf", "notes.weird"):
        extracted = extract(readme, name)
        assert extracted.content_type in (TEXT, "text/x-config")
        assert "frobnicates widgets" in extracted.sections[0].text
    assert sniff_type(b"#!/usr/bin/env python3\nprint('hi')\n", "tool") == "text/x-python"
    assert sniff_type("Grüße aus Köln\n".encode(), "GREETING") == TEXT


def test_rst_headings_become_sections_with_their_trail():
    rst = """=====
Guide
=====

Intro words.

Install
-------

Run the installer.

On Linux
~~~~~~~~

Use the package.

Usage
-----

Call it::

    frob --all
""".encode()
    extracted = extract(rst, "guide.rst")
    assert extracted.content_type == RST
    trails = {s.text.split("\n")[0]: s.headers for s in extracted.sections}
    assert trails["Install"] == ["Guide", "Install"]
    assert trails["On Linux"] == ["Guide", "Install", "On Linux"]
    assert trails["Usage"] == ["Guide", "Usage"]
    assert "frob --all" in extracted.sections[-1].text


def test_markdown_setext_and_asciidoc_headings():
    md = extract(b"Title\n=====\n\nText.\n\nPart\n----\n\nMore.\n\n```\n# not a heading\n```\n", "a.md")
    assert [s.headers for s in md.sections] == [["Title"], ["Title", "Part"]]
    assert "# not a heading" in md.sections[-1].text
    adoc = extract(b"= Book\n\n== Chapter\n\nText.\n\n----\n== inside a block\n----\n\n=== Part\n\nMore.\n", "b.adoc")
    assert [s.headers for s in adoc.sections] == [["Book"], ["Book", "Chapter"], ["Book", "Chapter", "Part"]]


def test_markdown_comments_are_not_text_outside_code():
    md = extract(b"<!-- generated: do not edit -->\n# Pumps\n\nPrime the pump <!-- TODO: torque -->first.\n\n"
                 b"<!--\nreviewers: ann, bob\n# not a heading\n-->\nThen open the valve.\n\n"
                 b"```html\n<!-- kept: it is code -->\n```\n", "a.md")
    text = "\n".join(s.text for s in md.sections)
    assert [s.headers for s in md.sections] == [["Pumps"]]
    assert "Prime the pump first." in text and "Then open the valve." in text
    for hidden in ("generated", "TODO", "reviewers", "not a heading"):
        assert hidden not in text, hidden
    assert "<!-- kept: it is code -->" in text


_PYTHON = "\n\n".join(
    f'''def function_{i}(value):
    """Return value scaled by {i}, for the report."""
    total = value * {i}

    if total > 100:
        total = 100
    return total''' for i in range(8)).encode()


def test_source_code_is_cut_at_definitions_not_mid_function():
    extracted = extract(b"import os\n\n\n" + _PYTHON + b"\n", "scale.py")
    assert extracted.content_type == "text/x-python"
    chunks = chunk_document(extracted, 100, 0, {})
    assert len(chunks) >= 4
    text = _document_text(extracted)
    for chunk in chunks:
        assert chunk.token_count <= 100
        assert text[chunk.start_char:chunk.end_char].rstrip() == chunk.content
        body = chunk.content if not chunk.content.startswith("import") else chunk.content.split("\n\n\n", 1)[1]
        assert body.startswith("def function_")
        # whole functions only: as many returns as definitions
        assert body.count("def function_") == body.count("return total")


def test_a_function_larger_than_a_chunk_is_cut_at_blank_lines_then_lines():
    big = "def big():\n" + "\n\n".join(f"    step_{i} = compute({i})\n    log(step_{i})" for i in range(40))
    chunks = chunk_document(extract(big.encode(), "big.py"), 60, 0, {})
    assert len(chunks) > 3 and all(c.token_count <= 60 for c in chunks)
    for chunk in chunks[1:]:
        assert chunk.content.lstrip().startswith("step_")  # a block's first line, never mid-statement


def _csv(rows: int) -> bytes:
    lines = ["name,city,score"] + [f"person {i},\"Town, {i % 5}\",{i * 3}" for i in range(rows)]
    return ("\n".join(lines) + "\n").encode()


def test_csv_rows_repeat_the_header_in_every_chunk():
    extracted = extract(_csv(200), "people.csv")
    assert extracted.content_type == CSV
    assert extracted.sections[0].text.startswith("name | city | score\nperson 0 | Town, 0 | 0\n")
    chunks = chunk_document(extracted, 80, 0, {})
    text = _document_text(extracted)
    assert len(chunks) > 5
    for chunk in chunks:
        assert chunk.content.startswith("name | city | score\n")
        assert chunk.content.endswith(text[chunk.start_char:chunk.end_char].rstrip())
        assert chunk.token_count <= 80
    rows = [line for c in chunks for line in c.content.split("\n")[1:] if not line.startswith("name |")]
    assert rows == text.split("\n")[1:]  # every row once, in order


def _xlsx(sheets: dict) -> bytes:
    import openpyxl

    book = openpyxl.Workbook()
    book.remove(book.active)
    for title, rows in sheets.items():
        sheet = book.create_sheet(title)
        for row in rows:
            sheet.append(row)
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def test_xlsx_sheets_are_sections_with_their_header_rows():
    data = _xlsx({"Prices": [["Item", "Price"], ["Tea", 3.5], ["Coffee", 4]],
                  "Staff": [["Name", "Role"]] + [[f"Person {i}", "Barista"] for i in range(60)]})
    assert sniff_type(data, "book.bin") == XLSX
    extracted = extract(data, "book.xlsx")
    assert [s.headers for s in extracted.sections] == [["Prices"], ["Staff"]]
    assert extracted.sections[0].text == "Item | Price\nTea | 3.5\nCoffee | 4"
    chunks = chunk_document(extracted, 60, 0, {})
    staff = [c for c in chunks if c.headers == ["Staff"]]
    assert len(staff) > 2 and all(c.content.startswith("Name | Role\n") for c in staff)


def test_a_zip_bomb_xlsx_is_refused_before_inflating():
    import zipfile

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("xl/workbook.xml", b"<workbook/>")
        zf.writestr("xl/media/bomb.bin", b"\0" * (20 * 1024 * 1024))
    with pytest.raises(IngestionError) as err:
        extract(out.getvalue(), "bomb.xlsx", Limits(max_uncompressed_bytes=10 * 1024 * 1024))
    assert err.value.code == "UNCOMPRESSED_TOO_LARGE" and "XLSX" in err.value.message


def test_json_keeps_key_paths():
    data = {"server": {"port": 8080, "hosts": ["a.example", "b.example"], "tls": {"enabled": True}},
            "name": "edge proxy", "odd key": None}
    extracted = extract(json.dumps(data).encode(), "config.json")
    assert extracted.content_type == JSON
    lines = extracted.sections[0].text.split("\n")
    assert "server.port: 8080" in lines and "server.hosts[1]: b.example" in lines
    assert "server.tls.enabled: true" in lines and "name: edge proxy" in lines and '["odd key"]: null' in lines


def test_large_json_is_one_section_per_top_level_key_and_broken_json_is_text():
    data = {f"service_{i}": {"description": "word " * 80, "replicas": i} for i in range(12)}
    extracted = extract(json.dumps(data).encode(), "services.json")
    assert [s.headers for s in extracted.sections] == [[f"service_{i}"] for i in range(12)]
    assert "service_3.replicas: 3" in extracted.sections[3].text
    commented = extract(b'{\n  // a comment\n  "a": 1\n}\n', "tsconfig.json")
    assert "// a comment" in commented.sections[0].text


@pytest.mark.parametrize("data,name,kind", [
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + b"\x00" * 20, "image.png", "PNG image"),
    (b"\x1f\x8b\x08\x00" + b"\x00" * 20, "logs.gz", "gzip archive"),
    (b"\x7fELF\x02\x01\x01" + b"\x00" * 20, "tool", "ELF executable"),
    (b"\xff\xd8\xff\xe0\x00\x10JFIF", "photo", "JPEG image"),
])
def test_binary_files_are_refused_naming_their_type(data, name, kind):
    assert refused_by_content(data) == kind
    with pytest.raises(IngestionError) as err:
        extract(data, name)
    assert err.value.code == "UNSUPPORTED_TYPE" and kind in err.value.message


def test_a_zip_that_is_not_an_office_document_is_refused_as_a_zip_archive():
    import zipfile

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        zf.writestr("notes.txt", "hello")
    with pytest.raises(IngestionError) as err:
        extract(out.getvalue(), "bundle")
    assert "ZIP archive" in err.value.message
    assert refused_by_content(b"\x00\x01\x02\x03" * 100) == "binary data of an unknown type"


def test_refused_by_name_knows_binary_extensions_only():
    assert refused_by_name("photo.PNG") == "PNG image"
    assert refused_by_name("dir/archive.tar") == "tar archive"
    assert refused_by_name("lib.so") == "shared library"
    for name in ("README", "notes.txt", "a.rst", "page.html", "data.csv", "book.xlsx", "x.py", ".bashrc"):
        assert refused_by_name(name) is None


PAGE = b"""<!DOCTYPE html><html><head><title>Widgets guide</title></head><body>
<header><nav><a href="/">Home</a> | <a href="/docs">Docs</a> | <a href="/blog">Blog</a></nav></header>
<div class="cookie-banner">We use cookies to improve your experience. <a href="/privacy">Accept all cookies</a></div>
<div id="toc"><h2>Contents</h2><ul><li><a href="#install">Installing widgets</a></li>
<li><a href="#config">Configuring widgets</a></li></ul></div>
<main>
<h1>Widgets guide</h1>
<p>Widgets are small reusable parts that the frobnicator assembles into gadgets. This guide explains how
to install them, how to configure them, and what to do when a widget refuses to start.</p>
<h2 id="install">Installing widgets</h2>
<p>Install the widget package with the system package manager, then run the widget daemon once so that it
creates its configuration directory under /etc/widgets with sensible defaults for a small site.</p>
<h2 id="config">Configuring widgets</h2>
<p>Each widget reads its settings from a file named after it. The most important setting is the pool size,
which bounds how many gadgets one widget serves at once; raise it on machines with many cores.</p>
</main>
<footer><p>Copyright 2024 Widget Corp. All rights reserved. <a href="/terms">Terms</a> <a href="/privacy">Privacy</a></p></footer>
</body></html>"""


def test_html_keeps_the_main_content_and_its_headings_only():
    extracted = extract(PAGE, "guide.html")
    text = _document_text(extracted)
    for gone in ("Home", "Blog", "cookies", "Contents", "Copyright 2024", "Terms"):
        assert gone not in text, gone
    assert [s.headers for s in extracted.sections if s.headers] == [
        ["Widgets guide"], ["Widgets guide", "Installing widgets"], ["Widgets guide", "Configuring widgets"]]
    assert "pool size" in extracted.sections[-1].text



def test_inline_code_and_links_stay_on_their_line():
    """Node.js's parameter lists: `path` <string> and a sentence are one line, with the type
    link kept (read as blocks, they came out a word a line and the link went as navigation).
    A real page: trafilatura reads a page this small as one flat paragraph."""
    pages = ROOT / "tests" / "data" / "nodejs_api" / "api"
    text = _document_text(extract((pages / "path.html").read_bytes(), "api/path.html"))
    assert "- path <string> The path to glob-match against." in text
    assert "- Returns: <boolean> Whether or not the path matched the pattern." in text
    readline = _document_text(extract((pages / "readline.html").read_bytes(), "api/readline.html"))
    assert "If true, no need to call rl.commit()." in readline

TEXINFO = b"""<html><head><title>Closure Example (libffi)</title></head><body lang="en">
<div class="section" id="Closure-Example">
<div class="header"><p>Next: <a href="Thread-Safety.html" accesskey="n" rel="next">Thread Safety</a>,
Previous: <a href="The-Closure-API.html" accesskey="p" rel="prev">The Closure API</a>,
Up: <a href="Using-libffi.html" accesskey="u" rel="up">Using libffi</a> [<a href="Index.html">Index</a>]</p></div>
<hr><h3 class="section">2.6 Closure Example</h3>
<p>A trivial example that creates a new <code>puts</code> by binding <code>fputs</code> with
<code>stdout</code>, so that calling the closure writes its argument to the standard output.</p>
<div class="example"><pre class="example">#include &lt;ffi.h&gt;

/* Acts like puts with the file given at time of enclosure. */
void puts_binding(ffi_cif *cif, void *ret, void* args[], void *stream)
{
  *(ffi_arg *)ret = fputs(*(char **)args[0], (FILE *)stream);
}
</pre></div>
<hr><div class="header"><p>Next: <a href="Thread-Safety.html">Thread Safety</a>,
Previous: <a href="The-Closure-API.html">The Closure API</a></p></div>
</div></body></html>"""


def test_a_texinfo_page_loses_its_navigation_bars_and_keeps_its_heading_and_code(monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("extraction must not open a socket")

    def no_dates(*args, **kwargs):
        raise AssertionError("no date extraction: the product has no use for it")

    import trafilatura.metadata

    monkeypatch.setattr(socket, "socket", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(trafilatura.metadata, "find_date", no_dates)
    extracted = extract(TEXINFO, "Closure-Example.html")
    text = _document_text(extracted)
    assert "Next:" not in text and "Previous:" not in text and "Up:" not in text
    assert extracted.sections[-1].headers == ["2.6 Closure Example"]
    assert "/* Acts like puts" in text and "\n\n/* Acts like puts" in text  # the code's blank line kept


def test_a_page_of_navigation_only_has_no_text_and_says_so():
    """Not an error: the document is PROCESSED with no chunks and this note."""
    menu = TEXINFO.split(b"<hr><h3")[0] + b"""<h3 class="section">2.3 Types</h3><ul class="section-toc">
<li><a href="Primitive-Types.html">Primitive Types</a></li><li><a href="Structures.html">Structures</a></li>
</ul></div></body></html>"""
    extracted = extract(menu, "Types.html")
    assert extracted.sections == [] and "navigation" in extracted.note
    assert Extracted.from_dict(extracted.to_dict()) == extracted  # it travels between the steps


def test_a_tiny_page_falls_back_to_the_plain_parser():
    extracted = extract(b"<html><body><h1>Hi</h1><p>One line.</p></body></html>", "tiny.html")
    assert "One line." in _document_text(extracted)


def _pdf_with_running_lines(pages: int) -> bytes:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_auto_page_break(False)
    pdf.set_font("Helvetica", size=11)
    for page in range(1, pages + 1):
        pdf.add_page()
        pdf.cell(0, 8, "ACME Pump Handbook - Confidential", new_x="LMARGIN", new_y="NEXT")
        topic = ["priming", "starting", "cleaning", "storing", "repairing"][(page - 1) % 5]
        pdf.multi_cell(0, 6, f"This chapter is about {topic} the pump.\nIts impeller needs {page * 10}"
                             f" millilitres of oil every year when {topic} it.")
        pdf.set_y(-25)
        pdf.cell(0, 8, f"Page {page} of {pages}")
    return bytes(pdf.output())


def test_pdf_running_headers_and_page_numbers_are_removed():
    extracted = extract(_pdf_with_running_lines(5), "handbook.pdf")
    assert [s.page for s in extracted.sections] == [1, 2, 3, 4, 5]
    text = _document_text(extracted)
    assert "ACME Pump Handbook" not in text and "of 5" not in text
    assert "This chapter is about cleaning the pump." in extracted.sections[2].text
    assert "30 millilitres" in extracted.sections[2].text


def test_two_page_pdfs_keep_their_repeated_lines():
    extracted = extract(_pdf_with_running_lines(2), "short.pdf")
    assert "ACME Pump Handbook" in extracted.sections[0].text
