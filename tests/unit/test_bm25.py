"""BM25's exact top k (chalicelib/retrieval/bm25.py) against every posting summed, over
postings drawn at random, with the constants the migrations use."""
import re
from pathlib import Path

import numpy as np
import pytest

from chalicelib.retrieval import bm25
from chalicelib.postings import Directory, Postings
from chalicelib.postings import apply_tail as _apply_tail
from chalicelib.storage.terms import BLOCK, TermStatistics

MIGRATIONS = Path(__file__).resolve().parents[2] / "chalicelib" / "storage" / "migrations"


class Source:
    """Postings in memory, in blocks of `block` as term_blocks would hold them; counts what
    was read."""

    def __init__(self, postings: dict[str, Postings], block: int = 8):
        self.postings, self.block, self.read_terms, self.blocks_read = postings, block, [], {}

    def read(self, terms):
        self.read_terms += terms
        return {t: self.postings[t] for t in terms if t in self.postings}

    def directory(self, terms):
        out = {}
        for t in terms:
            if t in self.postings:
                p, n = self.postings[t], self.block
                starts = range(0, len(p.ids), n)
                out[t] = Directory(p.ids[::n].copy(), np.array([p.ids[min(i + n, len(p.ids)) - 1] for i in starts]),
                                   np.array([p.tfs[i:i + n].max() for i in starts], float),
                                   np.array([p.dls[i:i + n].min() for i in starts], float))
        return out

    def read_blocks(self, wanted):
        out = {}
        for term, firsts in wanted.items():
            p = self.postings.get(term)
            if p is None:
                out[term] = Postings(np.empty(0, np.int64), np.empty(0), np.empty(0))
                continue
            self.blocks_read[term] = self.blocks_read.get(term, 0) + len(firsts)
            keep = np.zeros(len(p.ids), bool)
            for first in firsts:
                i = int(np.searchsorted(p.ids, first))
                keep[i:i + self.block] = True
            out[term] = Postings(p.ids[keep], p.tfs[keep], p.dls[keep])
        return out

    def tail_added(self, term):
        return np.empty(0, np.int64)


def _corpus(seed: int, chunks: int, vocabulary: int):
    """Chunks of Zipf-distributed words: a few terms in most chunks, most in a few."""
    rng = np.random.default_rng(seed)
    ids = np.sort(rng.choice(10 * chunks, size=chunks, replace=False)) + 1_000
    lengths = rng.integers(3, 60, size=chunks)
    words = [np.minimum(rng.zipf(1.3, size=n), vocabulary) for n in lengths]
    postings: dict[str, list] = {}
    extremes: dict[str, list] = {}
    total = 0.0
    for chunk_id, chunk in zip(ids, words):
        terms, counts = np.unique(chunk, return_counts=True)
        dl = float(counts.sum())
        total += dl
        for term, tf in zip(terms, counts):
            postings.setdefault(f"w{term}", []).append((chunk_id, float(tf), dl))
            low = extremes.setdefault(f"w{term}", [0.0, np.inf])
            low[0], low[1] = max(low[0], float(tf)), min(low[1], dl)
    packed = {t: Postings(np.array([p[0] for p in ps], dtype=np.int64), np.array([p[1] for p in ps], float),
                          np.array([p[2] for p in ps], float)) for t, ps in postings.items()}
    stats = TermStatistics(chunks=chunks, length=total, document_frequency={t: len(p.ids) for t, p in packed.items()},
                           extremes={t: tuple(e) for t, e in extremes.items()})
    return packed, stats


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("k", [1, 10, 40])
def test_the_top_k_equals_every_posting_summed(seed, k, monkeypatch):
    postings, stats = _corpus(seed, chunks=1_500, vocabulary=400)
    monkeypatch.setattr(bm25, "FIRST_READ", [1, 200, 5_000][seed % 3])
    rng = np.random.default_rng(100 + seed)
    words = [f"w{w}" for w in rng.choice(np.arange(1, 60), size=rng.integers(1, 9), replace=False)]
    q = bm25.query(stats, words)
    source = Source(postings)
    got = bm25.top(q, source, k)
    want = bm25.exact_reference(q, Source(postings), k)
    assert got.ids.tolist() == want.ids.tolist()
    np.testing.assert_allclose(got.scores, want.scores, rtol=1e-12)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("dense_span, whole", [(14_900, 0.5), (1, 0.5), (1 << 22, 0.0), (1 << 22, 2.0)])
def test_the_top_k_is_the_same_whatever_the_scores_layout_and_the_reads(seed, dense_span, whole, monkeypatch):
    """Partial scores by id that outgrow their span (14,900 of 15,000 ids) or never fit it
    (1), and terms read whole as soon as one block is wanted (0.0) or never (2.0)."""
    postings, stats = _corpus(seed, chunks=1_500, vocabulary=400)
    monkeypatch.setattr(bm25, "FIRST_READ", 200)
    monkeypatch.setattr(bm25, "DENSE_SPAN", dense_span)
    monkeypatch.setattr(bm25, "WHOLE", whole)
    rng = np.random.default_rng(200 + seed)
    words = [f"w{w}" for w in rng.choice(np.arange(1, 60), size=8, replace=False)]
    q = bm25.query(stats, words)
    got = bm25.top(q, Source(postings), 10)
    want = bm25.exact_reference(q, Source(postings), 10)
    assert got.ids.tolist() == want.ids.tolist()
    np.testing.assert_allclose(got.scores, want.scores, rtol=1e-12)


class CountedSource(Source):
    def __init__(self, postings):
        super().__init__(postings)
        self.reads = 0

    def read(self, terms):
        self.reads += 1
        return super().read(terms)


def test_terms_read_together_are_the_terms_read_one_at_a_time(monkeypatch):
    """_surely_read batches only terms that reading the ones before them cannot make
    optional: the same terms are read whole, in fewer queries, to the same top."""
    monkeypatch.setattr(bm25, "FIRST_READ", 1)
    batched_fewer = 0
    for seed in range(12):
        postings, stats = _corpus(seed, chunks=1_500, vocabulary=400)
        rng = np.random.default_rng(300 + seed)
        q = bm25.query(stats, [f"w{w}" for w in rng.choice(np.arange(1, 80), size=10, replace=False)])
        together = CountedSource(postings)
        got = bm25.top(q, together, 10)
        with monkeypatch.context() as m:
            m.setattr(bm25, "_surely_read", lambda unread, bound, floor: unread[:1])
            alone = CountedSource(postings)
            want = bm25.top(q, alone, 10)
        assert got.ids.tolist() == want.ids.tolist()
        assert together.read_terms == alone.read_terms
        assert together.reads <= alone.reads
        batched_fewer += together.reads < alone.reads
    assert batched_fewer  # the batching happened somewhere


def test_a_batch_stops_where_reading_the_terms_before_could_make_the_next_optional():
    bound = {"a": 5.0, "b": 3.0, "c": 3.0}
    # after a, the floor may reach 6 + 5: b's and c's bounds (6) might no longer reach it
    assert bm25._surely_read(["a", "b", "c"], bound, 6.0) == ["a"]
    # c alone outweighs any floor reading a and b could raise (2 + 1 + 1)
    assert bm25._surely_read(["a", "b", "c"], {"a": 1.0, "b": 1.0, "c": 10.0}, 2.0) == ["a", "b", "c"]
    assert bm25._surely_read(["a", "b", "c"], {"a": 1.0, "b": 1.0, "c": 1.5}, 2.0) == ["a"]


@pytest.mark.parametrize("dense_span", [1 << 22, 5_000, 1])
def test_partial_scores_grow_below_and_above_what_they_held_and_keep_their_best(dense_span, monkeypatch):
    """_Scores against a dict: terms whose ids reach below and above those seen (the array
    grows both ways, or passes its span and becomes sorted arrays, or never was one)."""
    monkeypatch.setattr(bm25, "DENSE_SPAN", dense_span)
    rng = np.random.default_rng(9)
    scores, want = bm25._Scores(keep=7), {}
    for low, high in [(3_000, 3_400), (2_000, 2_600), (3_300, 4_500), (100, 9_000), (2_500, 2_501)]:
        ids = np.sort(rng.choice(np.arange(low, high), size=min(150, high - low), replace=False))
        contributions = rng.uniform(0.1, 2.0, size=len(ids))
        scores.add(ids, contributions)
        for i, c in zip(ids.tolist(), contributions.tolist()):
            want[i] = want.get(i, 0.0) + c
        ids, sums = scores.above(0.0)
        assert ids.tolist() == sorted(want)
        np.testing.assert_allclose(sums, [want[i] for i in sorted(want)], rtol=1e-12)
        assert sorted(scores.of(scores.best()[0]).tolist()) == pytest.approx(sorted(want.values())[-7:], rel=1e-12)
        assert scores.kth(3) == pytest.approx(sorted(want.values())[-3], rel=1e-12)
    high = sorted(want.values())[-20]
    assert scores.above(high)[0].tolist() == sorted(i for i, v in want.items() if v >= high)


def test_the_commonest_terms_are_only_read_where_they_can_change_the_top(monkeypatch):
    monkeypatch.setattr(bm25, "FIRST_READ", 10)  # the rare terms' postings, not the common one's
    postings, stats = _corpus(3, chunks=5_000, vocabulary=2_000)
    common = sorted(stats.document_frequency, key=stats.document_frequency.get)[-1]
    rare = [t for t, df in stats.document_frequency.items() if 3 <= df <= 6][:3]
    q = bm25.query(stats, rare + [common])
    source = Source(postings)
    got = bm25.top(q, source, 5)
    assert got.ids.tolist() == bm25.exact_reference(q, Source(postings), 5).ids.tolist()
    assert common not in source.read_terms  # never read whole
    blocks = -(-stats.document_frequency[common] // source.block)
    assert source.blocks_read.get(common, 0) < blocks / 4  # only where a rare term's chunk could be


def test_no_posting_scores_above_its_terms_bound():
    postings, stats = _corpus(5, chunks=2_000, vocabulary=300)
    q = bm25.query(stats, list(postings))
    for term, weight, bound in zip(q.terms, q.idfs, q.bounds):
        p = postings[term]
        assert (weight * bm25.saturation(p.tfs, p.dls, q.average_length)).max() <= bound + 1e-9


def test_a_long_question_keeps_its_rarest_terms():
    postings, stats = _corpus(7, chunks=2_000, vocabulary=300)
    q = bm25.query(stats, list(postings) + ["absent"])
    assert len(q.terms) == bm25.TERMS_MAX < len(postings)
    assert max(q.dfs) <= min(df for t, df in stats.document_frequency.items() if t not in q.terms)
    assert list(q.dfs) == sorted(q.dfs)


def test_the_tail_voids_and_adds_postings():
    blocks = Postings(np.array([3, 5, 9], np.int64), np.array([1, 2, 3], float), np.array([10, 20, 30], float))
    tail = [{"chunk_id": 5, "tf": 2.0, "dl": 20.0, "sign": -1}, {"chunk_id": 5, "tf": 4.0, "dl": 8.0, "sign": 1},
            {"chunk_id": 1, "tf": 1.0, "dl": 5.0, "sign": 1}, {"chunk_id": 12, "tf": 1.0, "dl": 5.0, "sign": 1},
            {"chunk_id": 7, "tf": 1.0, "dl": 5.0, "sign": -1}]  # 7 is in no block: nothing to void
    got = _apply_tail(blocks, tail)
    assert got.ids.tolist() == [1, 3, 5, 9, 12]
    assert got.tfs.tolist() == [1, 1, 4, 3, 1] and got.dls.tolist() == [5, 10, 8, 30, 5]


def test_the_migrations_pack_blocks_of_the_size_bm25_assumes():
    defaults = [re.search(r"kb_bm25_rebuild\(kb text, block integer DEFAULT (\d+)\)", p.read_text())
                for p in sorted(MIGRATIONS.glob("*.sql"))]
    defaults = [d for d in defaults if d]
    assert defaults and int(defaults[-1].group(1)) == BLOCK  # the latest definition
    later = [p.name for p in sorted(MIGRATIONS.glob("*.sql")) if p.name > "0026" and "k1" in p.read_text().lower()]
    assert later == []  # k1 and b live in bm25.py alone; SQL gets them as parameters


def test_a_big_array_freed_is_reused_without_fresh_pages():
    """A process tuned as app.py tunes it at start keeps freed memory for the next array
    (process.keep_freed_memory), and importing the code tunes nothing: a second
    8 MB array touched after the first was freed takes next to no page faults, where glibc's
    default hands each one fresh pages (504 faults here for its 2,048 pages, 0 so kept)."""
    import subprocess
    import sys

    probe = ("import resource, numpy as np\n"
             "{setup}\n"
             "a = np.ones(1 << 20); del a\n"
             "before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
             "b = np.ones(1 << 20)\n"
             "print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)\n")

    def faults(setup: str) -> int:
        out = subprocess.run([sys.executable, "-c", probe.format(setup=setup)], capture_output=True, text=True,
                             check=True, cwd=Path(__file__).resolve().parents[2])
        return int(out.stdout.strip().splitlines()[-1])

    # Where transparent huge pages make fresh pages cheap already, only the second bound binds.
    assert faults("from chalicelib import process; process.keep_freed_memory()") <= max(faults("pass") // 5, 10)
    assert faults("from chalicelib.retrieval import bm25") > max(faults("pass") // 5, 10)


def test_ties_at_the_kth_score_go_to_the_lowest_ids_when_every_term_is_read():
    """A one-term question reads its term whole: the top k is then every chunk at the k-th
    score, by id, not whichever of the tied ones the running best kept."""
    ids = np.arange(1, 31, dtype=np.int64)
    postings = {"a": Postings(ids, np.ones(30), np.full(30, 10.0))}
    stats = TermStatistics(chunks=1_000, length=10_000.0, document_frequency={"a": 30}, extremes={"a": (1.0, 10.0)})
    q = bm25.query(stats, ["a"])
    for k in (1, 3, 10):
        assert bm25.top(q, Source(postings), k).ids.tolist() == list(range(1, k + 1))


class KnowledgeBases(Source):
    """Several knowledge bases' postings, each blocked on its own as term_blocks is (per
    kb_id), read together: a term's blocks are their union by first id, and ranges overlap."""

    def __init__(self, bases: list[dict[str, Postings]], block: int = 2):
        merged = {}
        for t in {t for base in bases for t in base}:
            parts = [base[t] for base in bases if t in base]
            ids = np.concatenate([p.ids for p in parts])
            order = np.argsort(ids, kind="stable")
            merged[t] = Postings(ids[order], np.concatenate([p.tfs for p in parts])[order],
                                 np.concatenate([p.dls for p in parts])[order])
        super().__init__(merged, block)
        self.bases = bases

    def _blocks(self, term):
        return sorted(((p.ids[i:i + self.block], p.tfs[i:i + self.block], p.dls[i:i + self.block])
                       for base in self.bases if term in base for p in [base[term]]
                       for i in range(0, len(p.ids), self.block)), key=lambda b: b[0][0])

    def directory(self, terms):
        return {t: Directory(np.array([b[0][0] for b in self._blocks(t)]), np.array([b[0][-1] for b in self._blocks(t)]),
                             np.array([b[1].max() for b in self._blocks(t)]), np.array([b[2].min() for b in self._blocks(t)]))
                for t in terms if self._blocks(t)}

    def read_blocks(self, wanted):
        out = {}
        for t, firsts in wanted.items():
            chosen = [b for b in self._blocks(t) if b[0][0] in set(np.asarray(firsts).tolist())]
            ids = np.concatenate([b[0] for b in chosen]) if chosen else np.empty(0, np.int64)
            order = np.argsort(ids, kind="stable")
            out[t] = Postings(ids[order], *(np.concatenate([b[i] for b in chosen])[order] if chosen else np.empty(0)
                                            for i in (1, 2)))
        return out


def test_the_top_k_is_exact_over_knowledge_bases_whose_blocks_overlap(monkeypatch):
    """One knowledge base's block (chunks 10-500) spans another's (20-41): the chunk 500 holds
    both terms, and its block of 'c' must not be taken for none."""
    monkeypatch.setattr(bm25, "FIRST_READ", 1)

    def postings(rows):
        a = np.array(sorted(rows), float)
        return Postings(a[:, 0].astype(np.int64), a[:, 1], a[:, 2])

    first = {"r": postings([(500, 1, 12), (600, 1, 10)]), "c": postings([(10, 1, 10), (500, 1, 12), (1000, 1, 10)])}
    second = {"c": postings([(i, 1, 10) for i in range(20, 42)])}
    stats = TermStatistics(chunks=1_000, length=10_000.0, document_frequency={"r": 2, "c": 25},
                           extremes={"r": (1.0, 10.0), "c": (1.0, 10.0)})
    q = bm25.query(stats, ["r", "c"])
    got = bm25.top(q, KnowledgeBases([first, second]), 1)
    want = bm25.exact_reference(q, KnowledgeBases([first, second]), 1)
    assert got.ids.tolist() == want.ids.tolist() == [500]
