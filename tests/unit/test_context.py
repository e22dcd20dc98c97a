import pytest

from chalicelib.embeddings.tokens import count_tokens
from chalicelib.retrieval.context import cut_to_tokens, pack, summarise
from chalicelib.retrieval.search import RRF_K, fuse
from chalicelib.storage.chunks import Hit


def _hit(chunk_id=1, content="", tokens=None, vector=None, keyword=None):
    return Hit(chunk_id=chunk_id, kb_id="kb_1", content=content, chunk_index=0, page=None, headers=[], metadata={},
               document_id=f"doc_{chunk_id}", title=None, filename="notes.txt", path=None, kind="file",
               indexed_at=None, tokens=tokens, vector=vector, keyword=keyword)


def _semantic(chunk_id, cosine):
    return _hit(chunk_id, vector=cosine)


def _keyword(chunk_id, share, vector=None):
    return _hit(chunk_id, keyword=share, vector=vector)


def _result(text):
    return _hit(content=text)


def test_results_that_fit_are_kept_whole():
    results = [_result("One short passage."), _result("Another short passage.")]
    kept, used, omitted = pack(results, 1000)
    assert [r.truncated for r in kept] == [False, False] and omitted == 0
    assert used == sum(count_tokens(r.content) for r in results)


def test_the_last_passage_is_cut_at_a_sentence_and_the_rest_omitted():
    long = " ".join(f"Sentence {i} explains one more detail of the design." for i in range(40))
    results = [_result("A first passage that fits."), _result(long), _result("Never reached.")]
    kept, used, omitted = pack(results, 120)
    assert len(kept) == 2 and omitted == 1
    assert kept[1].truncated is True
    # seed 000's truncateContent: a sentence cut says the text goes on too ("." + "...")
    assert kept[1].content.endswith("design....") and long.startswith(kept[1].content.removesuffix("..."))
    assert used <= 120 and used == sum(r.tokens for r in kept)


def test_a_passage_without_a_sentence_boundary_in_budget_is_cut_at_a_word_with_an_ellipsis():
    """Seed 000's truncateContent: no sentence ends within the budget, so the cut is at a word and says so."""
    text = "word " * 300
    kept, used, omitted = pack([_result(text), _result("Never reached.")], 60)
    assert len(kept) == 1 and omitted == 1 and kept[0].truncated is True
    assert kept[0].content.endswith("word...") and text.startswith(kept[0].content[:-3])
    assert 50 <= used <= 60


def test_nothing_fits_below_the_least_useful_size():
    kept, used, omitted = pack([_result("A first passage that fits."), _result("word " * 300)], 14)
    assert len(kept) == 1 and omitted == 1 and not kept[0].truncated


def test_a_count_made_when_the_chunk_was_cut_is_used_and_the_rest_are_counted():
    given, uncounted = _hit(1, "Counted when it was cut.", tokens=50), _hit(2, "Counted now.")
    kept, used, omitted = pack([given, uncounted], 1000)
    assert [r.tokens for r in kept] == [50, count_tokens("Counted now.")] and used == sum(r.tokens for r in kept)
    assert [r.item for r in kept] == [given, uncounted] and not any(r.truncated for r in kept)


def test_a_summary_is_its_first_sentences_without_an_ellipsis():
    text = "Alpha beta gamma. Delta epsilon zeta. Eta theta iota."
    assert summarise(text, 6) == "Alpha beta gamma." and summarise(text, 100) == text
    assert cut_to_tokens(text, 8) == "Alpha beta gamma...."  # the second sentence and "..." are 11


def test_cut_to_tokens_never_exceeds_the_budget():
    text = "Alpha beta gamma. Delta epsilon zeta. Eta theta iota."
    for budget in range(1, 30):
        cut = cut_to_tokens(text, budget)
        assert count_tokens(cut) <= budget
        assert text.startswith(cut.removesuffix("...")) and (cut == "" or cut.endswith(".")), cut
    long_word = "Pneumonoultramicroscopicsilicovolcanoconiosis is a word."
    assert count_tokens(long_word.split()[0]) > 4 and cut_to_tokens(long_word, 4) == ""  # no word fits with "..."


SEMANTIC = [_semantic(1, 0.9), _semantic(2, 0.8), _semantic(4, 0.5)]
KEYWORD = [_keyword(2, 0.5, vector=0.8), _keyword(3, 0.4, vector=0.6), _keyword(5, 0.1)]


def test_fusion_by_score_weighs_each_list_min_max_normalised():
    fused = {f.chunk_id: f for f in fuse(SEMANTIC, KEYWORD, (0.5, 0.5))}
    # semantic 1, 0.75, 0 and keyword 1, 0.75, 0 after min-max; a missing score counts 0
    assert fused[2].fused == pytest.approx(0.5 * 0.75 + 0.5 * 1.0)
    assert fused[1].fused == pytest.approx(0.5) and fused[3].fused == pytest.approx(0.375)
    assert all(f.fused == f.ranking_score for f in fused.values())
    assert [f.chunk_id for f in fuse(SEMANTIC, KEYWORD)][0] == 2  # also at the default weights  # agreement wins
    assert fused[2].vector == 0.8 and fused[2].keyword == 0.5 and fused[1].keyword is None
    # a keyword hit the semantic list lacks keeps the cosine it carries, or none
    assert (fused[3].vector, fused[3].keyword) == (0.6, 0.4) and fused[5].vector is None
    assert [f.chunk_id for f in fuse(SEMANTIC, KEYWORD, (1.0, 0.0))][:2] == [1, 2]
    assert [f.chunk_id for f in fuse(SEMANTIC, KEYWORD, (0.0, 1.0))][:2] == [2, 3]
    assert fuse([_semantic(7, 0.3)], [_keyword(7, 0.2)])[0].fused == pytest.approx(1.0)


def test_fusion_breaks_ties_by_the_raw_scores_then_the_chunk_id():
    fused = fuse([_semantic(9, 0.7), _semantic(4, 0.7)], [], (0.5, 0.5))
    assert [(f.chunk_id, f.fused) for f in fused] == [(4, 1.0), (9, 1.0)]
    # Two passages, each first in one list: 0.5 each. The one both lists rate higher overall
    # (the sample's "Adding documents" for "How do I make a file searchable?") comes first,
    # whatever its id.
    for ids in ((1, 2), (2, 1)):
        by_meaning, by_words = ids
        fused = fuse([_semantic(by_meaning, 0.402), _semantic(by_words, 0.384)],
                     [_keyword(by_words, 0.425, vector=0.384), _keyword(by_meaning, 0.076, vector=0.402)], (0.5, 0.5))
        assert [(f.chunk_id, f.fused) for f in fused] == [(by_words, 0.5), (by_meaning, 0.5)]


@pytest.mark.parametrize("method", ["score", "rank"])
def test_the_best_passage_of_the_only_list_that_found_anything_reads_1(method):
    """A question none of whose words a chunk holds leaves the keyword list empty: the
    semantic list's first passage is first in every list that found something, and reads
    1.0, not the 0.5 that counting the empty list's weight gave it."""
    fused = fuse([_semantic(3, 0.62), _semantic(8, 0.41), _semantic(1, 0.30)], [], (0.5, 0.5), method)
    assert fused[0].chunk_id == 3 and fused[0].fused == pytest.approx(1.0)
    assert [f.chunk_id for f in fused] == [3, 8, 1]
    only_words = fuse([], [_keyword(5, 0.4), _keyword(6, 0.2)], (0.7, 0.3), method)
    assert only_words[0].chunk_id == 5 and only_words[0].fused == pytest.approx(1.0)


def test_fusion_orders_passages_as_the_weighted_sum_does():
    """The divisor is the same for every passage of a search, so the order is what the
    weighted sum of the min-max scores gives (as before the divisor)."""
    import random
    rng = random.Random(7)
    for _ in range(200):
        semantic = [_semantic(i, rng.random()) for i in rng.sample(range(40), rng.randint(0, 12))]
        keyword = [_keyword(i, rng.random()) for i in rng.sample(range(40), rng.randint(0, 12))]
        w = rng.choice([(0.5, 0.5), (0.7, 0.3), (0.2, 0.8)])

        def scaled(hits, score):
            low, high = min(map(score, hits), default=0), max(map(score, hits), default=0)
            return {h.chunk_id: (score(h) - low) / (high - low) if high > low else 1.0 for h in hits}
        s, k = scaled(semantic, lambda h: h.vector), scaled(keyword, lambda h: h.keyword)
        summed = {i: w[0] * s.get(i, 0.0) + w[1] * k.get(i, 0.0) for i in {**s, **k}}
        raw = {h.chunk_id: h.vector for h in semantic}
        for h in keyword:
            raw[h.chunk_id] = raw.get(h.chunk_id, 0.0) + h.keyword
        assert [f.chunk_id for f in fuse(semantic, keyword, w)] == sorted(summed, key=lambda i: (-summed[i], -raw[i], i))


def test_fusion_by_rank_rewards_agreement():
    fused = fuse(SEMANTIC, KEYWORD, (0.5, 0.5), method="rank")
    top = fused[0]
    assert top.chunk_id == 2
    best = 0.5 / (RRF_K + 1) * 2
    assert top.fused == pytest.approx((0.5 / (RRF_K + 2) + 0.5 / (RRF_K + 1)) / best)
    assert 0 < top.fused <= 1
