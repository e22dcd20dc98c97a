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


_FIRST = " ".join(f"The first page states fact {i} plainly." for i in range(12))
_SECOND = " ".join(f"The second page adds detail {i} here." for i in range(12))


def test_sections_above_the_floor_are_never_spanned_and_carry_page_and_headers():
    doc = _doc(Section(_FIRST, page=1, headers=["Intro"]), Section(_SECOND, page=2, headers=["Intro", "Detail"]))
    chunks = chunk_document(doc, 500, 0, {})
    assert [(c.page, c.headers) for c in chunks] == [(1, ["Intro"]), (2, ["Intro", "Detail"])]
    full = SECTION_SEPARATOR.join(s.text for s in doc.sections)
    assert full[chunks[1].start_char:chunks[1].end_char] == _SECOND


def test_no_chunk_is_a_heading_alone_or_below_the_floor():
    from chalicelib.ingestion.chunk import MIN_CHUNK_TOKENS

    doc = _doc(Section("Install", headers=["Install"]),
               Section("Linux\n" + _FIRST, headers=["Install", "Linux"]),
               Section("Next: Thread Safety, Previous: Closures", headers=["Install", "Linux"]),
               Section(_SECOND, page=None, headers=["Usage"]),
               Section("See also: the FAQ.", headers=["Usage", "See also"]))
    chunks = chunk_document(doc, 500, 0, {})
    full = SECTION_SEPARATOR.join(s.text for s in doc.sections)
    assert len(chunks) == 2
    assert all(c.token_count >= MIN_CHUNK_TOKENS for c in chunks)
    # The heading joined what follows it; the chunk is headed by the section holding most of it.
    assert chunks[0].content.startswith("Install\n\nLinux\n") and chunks[0].headers == ["Install", "Linux"]
    assert "Next: Thread Safety" in chunks[1].content and chunks[1].headers == ["Usage"]
    assert chunks[1].content.endswith("See also: the FAQ.")  # the last small one joined the run before
    for chunk in chunks:
        assert full[chunk.start_char:chunk.end_char].strip() == chunk.content


def test_a_last_small_piece_of_a_section_borrows_from_the_one_before():
    from chalicelib.ingestion.chunk import MIN_CHUNK_TOKENS

    text = " ".join(f"Sentence number {i} talks about topic {i % 7}." for i in range(60))
    chunks = chunk_document(_doc(Section(text)), 200, 0, {})
    assert len(chunks) > 1
    assert all(MIN_CHUNK_TOKENS <= c.token_count <= 200 for c in chunks)
    assert " ".join(c.content for c in chunks) == text


def test_a_document_smaller_than_the_floor_is_one_chunk():
    chunks = chunk_document(_doc(Section("Tiny."), Section("Note.")), 500, 0, {})
    assert [c.content for c in chunks] == ["Tiny.\n\nNote."]


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


def test_a_chunk_of_merged_siblings_is_under_their_parent():
    """Two short sibling sections merged by the floor: the chunk is under their parent, not
    under the one holding most of it (a model cites the section)."""
    doc = _doc(Section("Travel policy", headers=["Travel policy"]),
               Section("Booking trains\nEmployees book train tickets through the travel desk three days ahead.",
                       headers=["Travel policy", "Booking trains"]),
               Section("Expenses\nMeals are reimbursed up to forty euros a day.", headers=["Travel policy", "Expenses"]))
    chunks = chunk_document(doc, 500, 0, {})
    assert len(chunks) == 1 and chunks[0].headers == ["Travel policy"]
