"""Lines repeated across many documents of one knowledge base: which lines are counted,
when one is common enough to go, and that code and tables keep theirs."""
from chalicelib.ingestion import common_lines
from chalicelib.ingestion.chunk import SECTION_SEPARATOR
from chalicelib.ingestion.extract import HTML, Extracted, Section
from chalicelib.storage.kb_lines import DOCUMENTS


def _text(extracted: Extracted) -> str:
    return SECTION_SEPARATOR.join(s.text for s in extracted.sections)


def _page(i: int, body: str) -> Extracted:
    return Extracted(HTML, [Section(f"frob-cmd{i}\n{body}\nfrob-cmd{i} is part of the frob(1) suite", headers=[
        f"frob-cmd{i}"]), Section("Options\nReturns:\n-q quiet", headers=[f"frob-cmd{i}", "Options"])])


def test_lines_common_to_many_documents_are_dropped_and_the_rest_stays():
    pages = [_page(i, f"Widget step {i} orders the widgets by weight number {i}.") for i in range(6)]
    footer = common_lines._hash(common_lines._shape("frob-cmd0 is part of the frob(1) suite"))
    hashes = common_lines.line_hashes(pages[0])
    assert DOCUMENTS in hashes and footer in hashes and hashes == sorted(hashes)
    # short lines (a term, a field label) and a section's heading are never counted
    assert common_lines._hash(common_lines._shape("Returns:")) not in hashes
    assert common_lines._hash(common_lines._shape("frob-cmd0")) not in hashes
    repeated = common_lines._hash(common_lines._shape("Widget step 0 orders the widgets by weight number 0."))
    counts = {DOCUMENTS: 6, footer: 4, repeated: 2}
    assert common_lines.common(counts) == {footer}  # 4 of 6 documents, 2 of 6 is not enough
    kept = common_lines.without(pages[0], common_lines.common(counts))
    assert "part of the frob(1) suite" not in _text(kept)
    assert "Widget step 0 orders" in _text(kept) and kept.sections[1] == pages[0].sections[1]


def test_the_share_of_documents_rises_with_the_knowledge_base():
    assert common_lines.threshold(1) == common_lines.threshold(60) == common_lines.MIN_DOCUMENTS
    assert common_lines.threshold(1000) == 50
    assert common_lines.common({DOCUMENTS: 1000, 7: 49, 8: 50}) == {8}


def test_code_and_tables_keep_their_lines():
    code = Extracted("text/x-python", [Section("import os.path as p  # the same in every file")])
    assert common_lines.line_hashes(code) == [DOCUMENTS]
    assert common_lines.without(code, {1, 2, 3}) is code


def test_a_paragraph_is_never_counted():
    paragraph = " ".join(["widget"] * (common_lines.MAX_WORDS + 1))
    assert common_lines.line_hashes(Extracted(HTML, [Section(paragraph)])) == [DOCUMENTS]
