from chalicelib.embeddings.tokens import count_tokens
from chalicelib.errors import Invalid
from chalicelib.ingestion.chunk import SECTION_SEPARATOR, chunk_document, validate_sizes
from chalicelib.ingestion.extract import Extracted, Section

import pytest


def _doc(*sections):
    return Extracted("text/plain", list(sections))


def test_chunks_respect_the_token_budget_and_end_at_sentences():
    text = " ".join(f"Sentence number {i} talks about topic {i % 7}." for i in range(200))
    chunks = chunk_document(_doc(Section(text)), 60, 10, {})
    assert len(chunks) > 5
    for chunk in chunks:
        assert chunk.token_count <= 60
        assert count_tokens(chunk.content) <= 60
        assert chunk.content.endswith(".")


def test_offsets_index_the_document_text_and_overlap_repeats_sentences():
    text = " ".join(f"Fact {i} is here." for i in range(120))
    chunks = chunk_document(_doc(Section(text)), 50, 12, {"team": "a"})
    for chunk in chunks:
        assert text[chunk.start_char:chunk.end_char].strip() == chunk.content
        assert chunk.metadata == {"team": "a"}
    assert [c.chunk_index for c in chunks] == list(range(len(chunks)))
    # With overlap, each chunk starts before the previous one ended.
    assert all(b.start_char < a.end_char for a, b in zip(chunks, chunks[1:]))


def test_chunks_never_span_sections_and_carry_page_and_headers():
    doc = _doc(Section("First page text. More words.", page=1, headers=["Intro"]),
               Section("Second page text.", page=2, headers=["Intro", "Detail"]))
    chunks = chunk_document(doc, 100, 0, {})
    assert [(c.page, c.headers) for c in chunks] == [(1, ["Intro"]), (2, ["Intro", "Detail"])]
    full = SECTION_SEPARATOR.join(s.text for s in doc.sections)
    assert full[chunks[1].start_char:chunks[1].end_char] == "Second page text."


def test_a_sentence_longer_than_a_chunk_is_cut_between_words():
    text = " ".join(["word"] * 500)
    chunks = chunk_document(_doc(Section(text)), 100, 0, {})
    assert len(chunks) >= 5
    assert all(c.token_count <= 100 for c in chunks)
    assert " ".join(c.content for c in chunks).split() == text.split()


@pytest.mark.parametrize("size,overlap", [(10, 0), (500, 400), (500, -1), (9000, 0)])
def test_invalid_chunk_sizes_are_refused(size, overlap):
    with pytest.raises(Invalid, match="chunking.chunk"):
        validate_sizes(size, overlap)
