"""The semantic strategy with an embedding function of the tests' own: a sentence's vector
is its topic's axis, so where the topic changes is known exactly."""
import numpy as np
import pytest

from chalicelib import limits
from chalicelib.embeddings.tokens import count_tokens
from chalicelib.ingestion.chunk import SECTION_SEPARATOR, Unit, chunk_document
from chalicelib.ingestion.extract import CSV, TEXT, Extracted, Section
from chalicelib.ingestion.semantic_chunk import boundary_similarities, pack_semantic, semantic_chunks

_TOPICS = ("cat", "rocket", "bread")


class TopicEmbedder:
    """One axis per topic word; counts its calls (the chunker embeds a document in one)."""

    def __init__(self):
        self.calls = []

    def __call__(self, texts):
        self.calls.append(list(texts))
        return [[1.0 if topic in text.lower() else 0.0 for topic in _TOPICS] + [0.01] for text in texts]


def _sentences(topic: str, n: int, start: int = 0) -> list[str]:
    return [f"Sentence {i} is about the {topic} and what the {topic} does on day {i}." for i in range(start, start + n)]


CATS, ROCKETS, BREAD = _sentences("cat", 8), _sentences("rocket", 8), _sentences("bread", 8)


def _doc(text: str, content_type: str = TEXT) -> Extracted:
    return Extracted(content_type, [Section(text, page=3, headers=["Notes"])])


def test_a_chunk_ends_exactly_where_the_topic_changes():
    text = " ".join(CATS + ROCKETS)
    embed = TopicEmbedder()
    chunks = semantic_chunks(_doc(text), 500, 50, {"team": "a"}, embed)
    assert [c.content for c in chunks] == [" ".join(CATS), " ".join(ROCKETS)]
    assert len(embed.calls) == 1 and len(embed.calls[0]) == 16  # every sentence, in one batch
    # the fixed strategy fills the chunk regardless: the two topics share it
    assert [c.content for c in chunk_document(_doc(text), 500, 50, {})] == [text]


def test_chunks_keep_size_offsets_pages_and_headers_and_cut_at_each_topic():
    text = " ".join(CATS + ROCKETS + BREAD)
    chunks = semantic_chunks(_doc(text), 60, 15, {"team": "a"}, TopicEmbedder())
    for chunk in chunks:
        assert chunk.token_count <= 60 and count_tokens(chunk.content) <= 60
        assert text[chunk.start_char:chunk.end_char].strip() == chunk.content
        assert (chunk.page, chunk.headers, chunk.metadata) == (3, ["Notes"], {"team": "a"})
        assert sum(topic in chunk.content for topic in _TOPICS) == 1, chunk.content  # no chunk mixes topics
    assert [c.chunk_index for c in chunks] == list(range(len(chunks)))
    # the first chunk of each topic starts with its first sentence and repeats nothing of the topic before
    for first in (ROCKETS[0], BREAD[0]):
        (i,) = [i for i, c in enumerate(chunks) if c.content.startswith(first)]
        assert chunks[i].start_char >= chunks[i - 1].end_char
    # within a topic, cuts forced by the size carry the overlap
    cats = [c for c in chunks if "cat" in c.content]
    assert len(cats) > 1 and all(b.start_char < a.end_char for a, b in zip(cats, cats[1:]))
    assert all(any(s in c.content for c in chunks) for s in CATS + ROCKETS + BREAD)  # nothing lost


def _units(*tokens: int) -> list[Unit]:
    out, at = [], 0
    for n in tokens:
        out.append(Unit(at, at + n, n))
        at += n + 1
    return out


def _indexes(groups, units):
    return [[units.index(u) for u in group] for group in groups]


def test_a_chunk_too_large_is_cut_at_its_least_similar_boundary():
    units = _units(10, 10, 10, 10, 10, 10)
    groups = pack_semantic(units, [0.9, 0.9, 0.2, 0.9, 0.9], [False] * 5, 45, 0, 10)
    assert _indexes(groups, units) == [[0, 1, 2], [3, 4, 5]]  # the fixed packing would cut after 4 units


def test_no_cut_leaves_a_chunk_below_the_floor_where_it_can_be_avoided():
    units = _units(5, 10, 10, 10, 10, 5)
    # a break after the first unit (5 tokens) and before the last (5 tokens) would leave scraps
    groups = pack_semantic(units, [0.1, 0.9, 0.9, 0.9, 0.1], [True, False, False, False, True], 100, 0, 20)
    assert _indexes(groups, units) == [[0, 1, 2, 3, 4, 5]]
    # the least similar boundary is after the first unit, but that chunk would be 5 tokens
    groups = pack_semantic(units, [0.1, 0.9, 0.5, 0.9, 0.9], [False] * 5, 40, 0, 20)
    assert _indexes(groups, units) == [[0, 1, 2], [3, 4, 5]]


def test_overlap_is_carried_after_a_size_cut_only_and_within_the_size():
    units = _units(10, 10, 10, 10, 10, 10, 10, 10)
    breaks = [False, False, False, False, True, False, False]
    groups = pack_semantic(units, [0.9] * 7, breaks, 30, 10, 10)
    assert _indexes(groups, units) == [[0, 1, 2], [2, 3, 4], [5, 6, 7]]
    assert all(sum(u.tokens for u in g) <= 30 for g in groups)


def test_boundary_similarity_compares_the_sentences_either_side():
    vectors = [[1, 0], [1, 0], [1, 0], [0, 1], [0, 1], [0, 1]]
    sims = boundary_similarities(np.asarray(vectors, dtype=float))
    assert sims.argmin() == 2 and sims[2] == pytest.approx(0.0)
    assert sims[1] == pytest.approx(2 ** -0.5) and sims[0] == pytest.approx(1.0)


def test_tables_and_documents_over_the_limit_keep_the_fixed_strategy(monkeypatch):
    def refuse(texts):
        raise AssertionError("nothing is embedded")

    table = Extracted(CSV, [Section("name,topic\n" + "\n".join(f"row{i},about the cat {i}" for i in range(80)))])
    assert semantic_chunks(table, 60, 0, {}, refuse) == chunk_document(table, 60, 0, {})
    monkeypatch.setattr(limits, "SEMANTIC_MAX_SENTENCES", 10)
    prose = _doc(" ".join(CATS + ROCKETS))
    assert semantic_chunks(prose, 60, 0, {}, refuse) == chunk_document(prose, 60, 0, {})


def test_sections_stay_apart_and_a_document_without_text_has_no_chunks():
    doc = Extracted(TEXT, [Section(" ".join(CATS), page=1), Section(" ".join(ROCKETS), page=2)])
    chunks = semantic_chunks(doc, 500, 0, {}, TopicEmbedder())
    assert [(c.page, c.start_char) for c in chunks] == [(1, 0), (2, len(" ".join(CATS)) + len(SECTION_SEPARATOR))]
    assert semantic_chunks(Extracted(TEXT, []), 500, 0, {}, TopicEmbedder()) == []
