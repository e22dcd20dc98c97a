"""What a chunk is embedded and indexed with (ingestion/context.py) and how a parent is grown
from its children (retrieval/parents.py), without a database."""
import pytest

from chalicelib import limits
from chalicelib.embeddings.tokens import count_tokens
from chalicelib.ingestion.context import context_line, embedded_text, fitting_tokens, window_tokens
from chalicelib.ingestion.model import Chunk
from chalicelib.retrieval import parents
from chalicelib.storage.chunks import Hit


def _kb(provider="local", chunk_tokens=500, overlap=0):
    return {"embedding_provider": provider, "chunk_tokens": chunk_tokens, "chunk_overlap": overlap}


def test_a_chunk_fits_the_local_models_window_with_its_context_line():
    assert window_tokens("local") == 254  # 256 with [CLS] and [SEP]
    assert fitting_tokens(_kb()) == 254 - limits.CHUNK_CONTEXT_TOKENS
    assert fitting_tokens(_kb(chunk_tokens=120)) == 120  # what fits is kept as asked
    assert fitting_tokens(_kb("openai", 2000)) == 2000 and fitting_tokens(_kb("openai", 8000)) == 8191 // 2 - limits.CHUNK_CONTEXT_TOKENS
    assert fitting_tokens({**_kb(chunk_tokens=1500), "child_tokens": 128}) == 128  # hierarchical: its children


def test_the_context_line_names_the_document_and_its_trail_once_and_fits():
    assert context_line("UPSERT", "lang_upsert.html", ["UPSERT", "2. Examples"]) == "UPSERT › 2. Examples"
    assert context_line(None, "guides/setup.md", []) == "guides/setup.md"
    assert context_line(None, None, []) is None
    assert context_line(None, "4983.txt", []) is None and context_line(None, "4983.txt", ["Intro"]) == "Intro"
    long = context_line("A title", None, ["word " * 200])
    assert count_tokens(long) <= limits.CHUNK_CONTEXT_TOKENS and long.startswith("A title › word")
    chunk = Chunk(0, "Sets the memory the server uses.", 0, 10, 8, title="Server › Memory")
    assert embedded_text(chunk) == "Server › Memory\nSets the memory the server uses."
    assert embedded_text(Chunk(0, "alone", 0, 5, 1)) == "alone"


def _hit(index, content, tokens, headers=("A",)):
    return Hit(chunk_id=index + 100, kb_id="kb_1", content=content, chunk_index=index, page=None,
               headers=list(headers), metadata={}, document_id="doc_1", title=None, filename="f.txt",
               path="f.txt", kind="file", indexed_at=None, tokens=tokens, vector=1.0)


@pytest.mark.parametrize("budget, expected", [(200, (0, 3)), (100, (2, 3)), (60, None)])
def test_a_parent_grows_around_its_child_within_the_budget_and_the_section(budget, expected):
    # Chunk 4 begins another section: storage's neighbours never reads it for a child of this one
    # (the integration test of neighbours), so the parent stops at 3 whatever the budget.
    near = {i: {"chunk_index": i, "content": f"Part {i} says something.", "token_count": 40} for i in range(0, 4)}
    grown = parents._grown(_hit(2, near[2]["content"], 40), near, budget, [])
    assert grown.span == expected
    if expected:
        assert grown.content.split(" says something. ")[0].startswith(f"Part {expected[0]}")
        # the children's counts summed: they share no overlap (the next test: with overlaps, real counts)
        assert grown.tokens == 40 * (expected[1] - expected[0] + 1)
    assert parents._grown(_hit(2, "x", 40), near, 200, [(3, 3)]).span == (0, 2)  # not into an answered passage


def test_neighbours_that_overlap_are_joined_once():
    left = "The lamp is lit at dusk. The keeper climbs the stairs every single evening."
    right = "The keeper climbs the stairs every single evening. Then he winds the clock."
    assert parents._joined(left, right) == ("The lamp is lit at dusk. The keeper climbs the stairs every single"
                                            " evening. Then he winds the clock.",
                                            "The keeper climbs the stairs every single evening.")
    assert parents._joined("One.", "Two.") == ("One.\n\nTwo.", "")


def test_a_parent_s_tokens_are_its_text_s_without_counting_it_again(monkeypatch):
    """The chunks' counts, less the overlaps the joined text holds once, are the joined text's
    count: a real document's chunks, cut with overlap by the chunker, grown into parents."""
    from chalicelib.ingestion.chunk import chunk_document
    from chalicelib.ingestion.extract import extract
    from tests.conftest import ROOT

    text = (ROOT / "tests" / "data" / "nodejs_api" / "api" / "permissions.html").read_bytes()
    chunks = chunk_document(extract(text, "permissions.html"), 120, 30, {})
    def near(child):  # what storage's neighbours reads for it: the chunks of its section
        return {c.chunk_index: {"chunk_index": c.chunk_index, "content": c.content, "token_count": c.token_count}
                for c in chunks if c.headers == child.headers}
    counted = []
    monkeypatch.setattr(parents, "count_tokens", lambda t: counted.append(t) or count_tokens(t))
    grown = [parents._grown(_hit(c.chunk_index, c.content, c.token_count)._replace(headers=c.headers), near(c), 600,
                            []) for c in chunks]
    assert sum(1 for g in grown if g.span and g.span[1] - g.span[0] >= 2) >= 5  # parents of three chunks or more
    assert sum(1 for g in grown if g.span) and all(g.tokens == count_tokens(g.content) for g in grown)
    assert counted and max(map(count_tokens, counted)) <= 30 + 5  # only overlaps were tokenized, never a parent


def test_neighbours_are_read_for_the_hits_a_parent_is_still_wanted_for(monkeypatch):
    """A hit inside a passage already answered makes no parent: the hits after it are read then,
    and the passages are those of reading every hit's neighbours at once."""
    doc = {i: {"chunk_index": i, "content": f"Part {i} says something.", "token_count": 40} for i in range(30)}
    hits = [_hit(i, doc[i]["content"], 40) for i in (5, 6, 20, 12, 27)]  # 6 lies in 5's parent
    reads = []

    def neighbours(conn, children, reaches, kb_ids):
        reads.append([c - 100 for c in children])
        return [{"child": c, **doc[i]} for c, r in zip(children, reaches)
                for i in range(c - 100 - r, c - 100 + r + 1) if i in doc]
    monkeypatch.setattr(parents.chunks, "neighbours", neighbours)
    monkeypatch.setattr(parents, "reach", lambda kb: 2)
    kbs = {"kb_1": _kb(chunk_tokens=120)}  # parents of three chunks of 40 tokens
    answered = parents.parents(None, hits, kbs, 3)
    assert reads == [[5, 6, 20], [12]]  # three wanted, then one more once 6 was passed over
    assert [h.span for h in answered] == [(4, 6), (19, 21), (11, 13)]
    reads.clear()
    assert [h.span for h in parents.parents(None, hits, kbs, 5)] == [(4, 6), (19, 21), (11, 13), (26, 28)]
    assert reads == [[5, 6, 20, 12, 27]]
