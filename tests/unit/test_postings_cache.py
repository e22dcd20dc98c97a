"""The worker's cache of decoded BM25 blocks (chalicelib/storage/postings_cache.py, PostingsCache)
and the slicing of blocks out of a kept term (_inside)."""
import numpy as np
import pytest

from chalicelib import postings
from chalicelib.postings import Directory, Postings
from chalicelib.postings import inside as _inside
from chalicelib.postings import widened as _widened
from chalicelib.storage import postings_cache, term_blocks
from chalicelib.storage.postings_cache import PostingsCache


def _postings(ids, tf=1.0, dl=40.0) -> Postings:
    ids = np.asarray(ids, dtype=np.int64)
    return Postings(ids, np.full(len(ids), tf), np.full(len(ids), dl))


def test_postings_come_back_as_float64_equal_to_what_was_kept_and_cannot_be_changed_there():
    cache = PostingsCache(1 << 20)
    p = Postings(np.array([3, 9, 70_000], dtype=np.int64), np.array([1.0, 300.0, 2.0]), np.array([5.0, 70_000.0, 9.0]))
    cache.put(("postings", "kb", 1, "pump"), p)
    kept = cache.get(("postings", "kb", 1, "pump"))
    assert (kept.tfs.dtype, kept.dls.dtype) == (np.uint16, np.uint32)  # 3 and 12 bytes, not 24 each
    got = _widened(kept)
    assert got.tfs.dtype == got.dls.dtype == np.float64
    assert got.ids.tolist() == [3, 9, 70_000] and got.tfs.tolist() == [1.0, 300.0, 2.0]
    assert got.dls.tolist() == [5.0, 70_000.0, 9.0]
    with pytest.raises(ValueError):
        got.ids[0] = 4  # shared with the next search that reads it
    assert cache.get(("postings", "kb", 2, "pump")) is None  # another version of the blocks


def test_the_least_recently_read_go_first_past_the_capacity():
    one = _postings(range(1000))  # 8 kB of ids, 1 kB each of frequencies and lengths, kept
    cache = PostingsCache(3 * (10_000 + 200))
    for term in "abc":
        cache.put(term, one)
    assert cache.get("a") is not None  # a is now the most recent
    cache.put("d", one)
    assert [t for t in "abcd" if cache.get(t) is not None] == ["a", "c", "d"]
    assert cache.size <= cache.capacity
    cache.put("huge", _postings(range(10_000)))  # larger than the whole cache: not kept, nothing dropped
    assert cache.get("huge") is None and all(cache.get(t) is not None for t in "acd")


def _directory(firsts, lasts) -> Directory:
    n = len(firsts)
    return Directory(np.asarray(firsts, dtype=np.int64), np.asarray(lasts, dtype=np.int64), np.ones(n), np.ones(n))


@pytest.mark.parametrize("seed", range(5))
def test_blocks_sliced_from_a_kept_term_are_those_blocks_postings(seed):
    rng = np.random.default_rng(seed)
    ids = np.sort(rng.choice(100_000, size=3_000, replace=False)).astype(np.int64)
    cuts = np.sort(rng.choice(np.arange(1, len(ids)), size=40, replace=False))
    blocks = np.split(np.arange(len(ids)), cuts)
    d = _directory([ids[b[0]] for b in blocks], [ids[b[-1]] for b in blocks])
    chosen = np.sort(rng.choice(len(blocks), size=12, replace=False))
    want = ids[np.concatenate([blocks[i] for i in chosen])].tolist()
    assert _inside(_postings(ids), d, d.first[chosen]).ids.tolist() == want
    # in any order, and ids that start no block ask for nothing
    stray = np.setdiff1d(np.arange(d.first[0], d.first[-1]), d.first)[:5]
    asked = rng.permutation(np.concatenate([d.first[chosen], stray]))
    assert _inside(_postings(ids), d, asked).ids.tolist() == want


def test_blocks_of_several_knowledge_bases_give_each_posting_once():
    """Two knowledge bases' blocks over interleaved ids: the ranges overlap, and one's postings
    inside the other's ranges come too (a superset), never twice."""
    mine = _postings([10, 20, 30, 40, 50, 60])
    # mine: [10..30], [40..60]; another's: [15..45], [55..58]
    d = _directory([10, 15, 40, 55], [30, 45, 60, 58])
    got = _inside(mine, d, np.array([10, 15, 55]))
    assert got.ids.tolist() == [10, 20, 30, 40]
    assert _inside(mine, d, np.array([55])).ids.tolist() == []


@pytest.mark.parametrize("ids, tfs, dls", [
    ([5, 6, 9, 70_000], [1, 2, 3, 255], [10, 300, 7, 65_535]),  # a step past 2 bytes, lengths in 2
    ([3, 2**33, 2**33 + 1], [1, 1, 70_000], [1, 1, 1]),  # a step past 4 bytes, frequencies in 4
    ([42], [1], [12]),
    ([], [], []),
])
def test_postings_shared_through_redis_read_back_as_they_were(ids, tfs, dls):
    p = Postings(np.array(ids, np.int64), np.array(tfs, float), np.array(dls, float))
    data = bytes(postings.to_shared(p))
    back = postings.from_shared(data)
    assert back.ids.tolist() == ids and back.tfs.tolist() == tfs and back.dls.tolist() == dls
    assert back.ids.dtype == np.int64
    with pytest.raises(ValueError):
        postings.from_shared(data[:-1] if ids else data + b"\0")


def test_directories_shared_through_redis_read_back_as_they_were():
    d = Directory(np.array([1, 200], np.int64), np.array([150, 260], np.int64), np.array([3.0, 1.0]),
                        np.array([12.0, 40.0]))
    data = postings.directory_to_shared(d)
    back = postings.directory_from_shared(data)
    assert [a.tolist() for a in (back.first, back.last, back.max_tf, back.min_dl)] == [[1, 200], [150, 260], [3, 1], [12, 40]]
    with pytest.raises(ValueError):
        postings.directory_from_shared(data[:-4])


def test_a_search_asks_redis_once_for_its_own_common_terms_only(monkeypatch):
    """Not for a rare term (SQL is cheaper), nor for a long question's commonest terms beyond
    bm25.TERMS_MAX, which the search never reads (statistics hold every word of the question)."""
    asked = []
    monkeypatch.setattr(postings_cache.SHARED, "min_postings", 100)
    monkeypatch.setattr(postings_cache.SHARED, "get", lambda keys: asked.append(keys) or [None] * len(keys))
    source = term_blocks.BlockPostings(None, ["kb"], ("rare", "common"), {"kb": 7},
                                 {"rare": 5, "common": 500, "beyond-the-limit": 900})
    assert source._shared("postings", ["rare", "common"], postings.from_shared) == {}
    assert source._shared("directory", ["common"], postings.directory_from_shared) == {}
    assert len(asked) == 1
    assert sorted(asked[0]) == sorted(postings_cache.shared_key(kind, "kb", 7, "common") for kind in ("postings", "directory"))
