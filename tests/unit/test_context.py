from chalicelib.embeddings.tokens import count_tokens
from chalicelib.retrieval.context import cut_to_tokens, pack
from chalicelib.retrieval.search import RRF_K, fuse


def _result(text, score=1.0):
    return {"content": text, "score": score}


def test_results_that_fit_are_kept_whole():
    results = [_result("One short passage."), _result("Another short passage.")]
    kept, used, omitted = pack(results, 1000)
    assert [r["truncated"] for r in kept] == [False, False] and omitted == 0
    assert used == sum(count_tokens(r["content"]) for r in results)


def test_the_last_passage_is_cut_at_a_sentence_and_the_rest_omitted():
    long = " ".join(f"Sentence {i} explains one more detail of the design." for i in range(40))
    results = [_result("A first passage that fits."), _result(long), _result("Never reached.")]
    kept, used, omitted = pack(results, 120)
    assert len(kept) == 2 and omitted == 1
    assert kept[1]["truncated"] is True
    assert kept[1]["content"].endswith("design.") and long.startswith(kept[1]["content"])
    assert used <= 120 and used == sum(r["tokens"] for r in kept)


def test_nothing_fits_means_everything_is_omitted():
    kept, used, omitted = pack([_result("word " * 300)], 60)
    assert kept == [] and used == 0 and omitted == 1


def test_cut_to_tokens_never_exceeds_the_budget():
    text = "Alpha beta gamma. Delta epsilon zeta. Eta theta iota."
    for budget in range(1, 30):
        cut = cut_to_tokens(text, budget)
        assert count_tokens(cut) <= budget
        assert text.startswith(cut)


def test_reciprocal_rank_fusion_rewards_agreement():
    semantic = [{"chunk_id": 1, "score": 0.9}, {"chunk_id": 2, "score": 0.8}]
    keyword = [{"chunk_id": 2, "score": 0.5}, {"chunk_id": 3, "score": 0.4}]
    fused = fuse(semantic, keyword)
    assert [f["chunk_id"] for f in fused][0] == 2
    top = fused[0]
    assert abs(top["fusedScore"] - (1 / (RRF_K + 2) + 1 / (RRF_K + 1))) < 1e-12
    assert 0 < top["score"] <= 1 and top["vectorScore"] == 0.8 and top["keywordScore"] == 0.5
    only_semantic = next(f for f in fused if f["chunk_id"] == 1)
    assert only_semantic["keywordScore"] is None
