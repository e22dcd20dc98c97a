"""The format registry (chalicelib/ingestion/formats/registry.py) and what sniffing and
extraction accept agree: every way the registry says a format is recognised gives its
content type, every type sniffing can answer has the registry's reader, and extraction
reads each with that format's reader."""
import io

import pytest

from chalicelib.ingestion.extract import extract, sniff_type
from chalicelib.ingestion.formats import registry, sniff
from chalicelib.ingestion.formats.base import Extracted, Format, Section

TEXT = b"Pumps and valves\n\nA pump moves water through the valves of the house.\n"


def _pdf() -> bytes:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=11)
    pdf.cell(0, 8, "A pump moves water through the valves of the house.")
    return bytes(pdf.output())


def _docx() -> bytes:
    import docx

    document = docx.Document()
    document.add_paragraph("A pump moves water through the valves of the house.")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def _xlsx() -> bytes:
    import openpyxl

    book = openpyxl.Workbook()
    book.active.append(["part", "use"])
    book.active.append(["pump", "moves water"])
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


BINARY_SAMPLES = {"PDF": _pdf, "DOCX": _docx, "XLSX": _xlsx}


def _samples():
    """(format, file name, bytes, the content type it should sniff as) for every way the
    registry names each format."""
    for f in registry.FORMATS:
        if f in registry.BINARY:
            yield f, "file.bin", BINARY_SAMPLES[f.name](), f.content_types[0]
            continue
        body = b'{"pump": "moves water"}\n' if "application/json" in f.content_types else TEXT
        for ext, content_type in f.extensions.items():
            yield f, f"docs/file{ext}", body, content_type
        for name, content_type in f.file_names.items():
            yield f, f"src/{name}", body, content_type
        for interpreter, content_type in f.interpreters.items():
            yield f, "bin/run", b"#!/usr/bin/env " + interpreter.encode() + b"\n" + TEXT, content_type
        if f.looks_like is not None:
            yield f, "page", b"<!doctype html><html><body><p>" + TEXT + b"</p></body></html>", f.content_types[0]


SAMPLES = list(_samples())


@pytest.mark.parametrize("fmt, name, data, content_type", SAMPLES, ids=[s[1] + ":" + s[0].name for s in SAMPLES])
def test_each_way_the_registry_names_a_format_sniffs_and_reads_as_it(fmt: Format, name, data, content_type):
    assert sniff_type(data, name) == content_type
    assert registry.format_of(content_type) is fmt
    assert extract(data, name).content_type in fmt.content_types


def test_every_format_is_sampled_and_every_type_sniffing_can_answer_has_a_reader():
    assert {f.name for f, *_ in SAMPLES} == {f.name for f in registry.FORMATS}
    answered = {*sniff.TEXT_EXTENSIONS.values(), *registry.FILE_NAMES.values(), *registry.INTERPRETERS.values(),
                *registry.ZIP_MEMBERS.values(), registry.DEFAULT.content_types[0]}
    assert answered <= registry.BY_TYPE.keys()
    assert {t for _, _, _, t in SAMPLES} == registry.BY_TYPE.keys()  # and no type the registry lists is unreachable
    assert len(registry.BY_TYPE) == sum(len(f.content_types) for f in registry.FORMATS)  # each type one format's


def test_sniffing_and_extraction_name_no_format_of_their_own():
    """A new format is its module and its line in the registry: sniff.py reads only the
    registry's entries, and extract() asks the registry for the reader (no branch a format)."""
    import ast
    import inspect

    from chalicelib.ingestion import extract as extract_module

    tree = ast.parse(inspect.getsource(sniff))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported == {"typing", "chalicelib.ingestion.errors", "chalicelib.ingestion.formats.registry"}
    body = ast.parse(inspect.getsource(extract_module.extract))
    assert not [n for n in ast.walk(body) if isinstance(n, ast.Compare)
                and any(isinstance(c, ast.Name) and c.id.isupper() for c in [n.left, *n.comparators])]


def test_the_formats_table_has_a_row_a_format():
    table = registry.formats_table().splitlines()
    assert len(table) == 2 + len(registry.FORMATS)
    assert all(row.count(" | ") == 3 for row in table[2:])  # a | inside a cell is escaped
    assert any(row.startswith("| PDF | ") and "pypdf" in row for row in table)
