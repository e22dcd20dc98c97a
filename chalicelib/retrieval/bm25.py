"""BM25's scoring: its constants, its formulas (in Python, numpy and SQL), the bounds that
prune it, and the exact top k of a question over its terms' postings.

Postings are stored per knowledge base and term in blocks of chunk ids with each
posting's term frequency and chunk length (term_blocks), plus the tail written since the
last compaction (chunk_terms); chalicelib.storage.term_blocks reads them as numpy arrays (a
PostingSource), chalicelib.postings is their encoding. The search here is exact: MaxScore,
term at a time. Terms are read rarest first and scored whole; a chunk the rest of the terms
could still lift into the top k is completed from those terms' blocks that hold its id; the
commonest terms, whose bounds together stay below the k-th score found, are read only
there. Where the commonest terms' blocks hold a candidate almost everywhere, block bounds
prune little and the time goes to moving and adding postings: hence packed blocks, adding
by index (_Scores) and the allocator's tuning at process start (chalicelib/process.py).
The benchmark report (docs/benchmarks.md) has the figures.
"""
import math
from dataclasses import dataclass
from typing import Optional, Protocol

import numpy as np

from chalicelib.postings import EMPTY, Directory, Postings
from chalicelib.storage.terms import TermStatistics

# As Lucene and rank_bm25 default to.
K1, B = 1.2, 0.75
# A question's terms beyond these (the commonest) are left out.
TERMS_MAX = 32
# When the rows the caller may not read or the filters drop leave fewer than asked, the
# ranking is read again this many times as deep, before every match is scored instead.
DEEPER = 4
# The chunks of best partial score after the first read that are completed for a floor:
# this many times k.
KNOWN = 2
# The widest span of chunk ids whose partial scores are kept in an array indexed by id
# (_Scores): 4M ids, 32 MB of float64.
DENSE_SPAN = 1 << 22
# A term whose blocks to read are at least this share of its blocks is read whole: at a
# million chunks a whole term read cost 0.07 us a posting, chosen blocks 0.10-0.15.
WHOLE = 0.5
# Postings the first read takes (the rarest terms, whole) before the k-th score is known.
FIRST_READ = 30_000


def idf(chunks: int, df: int) -> float:
    """Lucene's inverse document frequency: never negative, even for a term in every chunk."""
    return math.log(1 + (chunks - df + 0.5) / (df + 0.5))


def saturation(tf, dl, average_length: float):
    """BM25's term-frequency factor, for numbers or numpy arrays; at most K1 + 1."""
    return tf * (K1 + 1) / (tf + K1 * (1 - B + B * dl / average_length))


def sql_saturation(tf: str, dl: str) -> str:
    """The same factor as SQL over the expressions tf and dl, with %(k1)s, %(b)s and %(avgdl)s
    (Bm25Query.sql_params) as its parameters."""
    return f"{tf} * (%(k1)s + 1) / ({tf} + %(k1)s * (1 - %(b)s + %(b)s * {dl} / %(avgdl)s))"


@dataclass(frozen=True)
class Bm25Query:
    """A question as BM25 scores it: its terms, rarest first, with their document
    frequencies, inverse document frequencies and bounds (the most a term adds to any
    chunk's score), and the knowledge bases' average chunk length."""
    terms: tuple[str, ...]
    dfs: tuple[int, ...]
    idfs: tuple[float, ...]
    bounds: tuple[float, ...]
    average_length: float

    @property
    def best(self) -> float:
        """The score of a chunk that holds every term often: keyword scores are shown as
        a share of it, 0..1."""
        return sum(self.idfs) * (K1 + 1)

    @staticmethod
    def sql_saturation(tf: str, dl: str) -> str:
        return sql_saturation(tf, dl)

    def sql_params(self) -> dict:
        return {"terms": list(self.terms), "idfs": list(self.idfs), "k1": K1, "b": B,
                "avgdl": self.average_length or 1.0}


def query(stats: TermStatistics, words: list[str]) -> Bm25Query:
    """The question's terms that occur in the knowledge bases, the TERMS_MAX rarest when a
    long question has more."""
    n = stats.chunks
    average = stats.length / n if n else 1.0
    df = stats.document_frequency
    kept = sorted((t for t in dict.fromkeys(words) if t in df), key=lambda t: (df[t], t))[:TERMS_MAX]
    idfs = tuple(idf(n, df[t]) for t in kept)
    bounds = tuple(w * saturation(*stats.extremes[t], average) for w, t in zip(idfs, kept))
    return Bm25Query(terms=tuple(kept), dfs=tuple(df[t] for t in kept), idfs=idfs, bounds=bounds,
                     average_length=average)


class PostingSource(Protocol):
    def read(self, terms: list[str]) -> dict[str, Postings]:
        """Every posting of these terms."""

    def directory(self, terms: list[str]) -> dict[str, "Directory"]:
        """Each term's blocks: their ranges and bounds."""

    def read_blocks(self, wanted: dict[str, np.ndarray]) -> dict[str, Postings]:
        """Each term's blocks that start at these ids, and the tail's new postings of it
        (empty postings for a term that has neither)."""

    def tail_added(self, term: str) -> np.ndarray:
        """The ids of the tail's new postings of the term, sorted."""


@dataclass(frozen=True)
class Ranked:
    """The exact top k: chunk ids best first, with their BM25 scores, and how many postings
    were read to find them."""
    ids: np.ndarray
    scores: np.ndarray
    postings_read: int


class _Scores:
    """Partial scores by chunk id, summed over the terms read so far, and the `keep` best
    of them (a chunk's partial score only grows, so the best after a term are among the
    best before it and the chunks it added to: no pass over every score a term).

    Kept in an array indexed by id from the lowest seen while the ids span at most
    DENSE_SPAN (a knowledge base's ids are dense unless other tenants wrote between its
    stores): a term's contributions are then added by index, where a sorted merge of each
    term into those seen (searchsorted, then insert) costs far more at a million chunks.
    Past that span, the sorted merge."""

    def __init__(self, keep: int):
        self.keep = keep
        self._base, self._dense = 0, None
        self._ids, self._sums = np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64)
        self._best = np.empty(0, dtype=np.int64)

    def add(self, ids: np.ndarray, contributions: np.ndarray) -> None:
        """One term's contributions (its ids ascending, each once, every one above 0)."""
        if not len(ids):
            return
        self._place(int(ids[0]), int(ids[-1]))
        if self._dense is not None:
            at = ids - self._base
            sums = self._dense[at] + contributions
            self._dense[at] = sums
        else:
            at = np.searchsorted(self._ids, ids)
            seen = at < len(self._ids)
            seen[seen] = self._ids[at[seen]] == ids[seen]
            self._sums[at[seen]] += contributions[seen]
            new = ~seen
            if new.any():
                self._ids = np.insert(self._ids, at[new], ids[new])
                self._sums = np.insert(self._sums, at[new], contributions[new])
            sums = self.of(ids)
        # Only the term's chunks now at or above the least of the best can join them.
        if len(self._best) >= self.keep:
            ids = ids[sums >= self.of(self._best).min()]
        if len(ids):
            at = np.minimum(np.searchsorted(ids, self._best), len(ids) - 1)
            ids = np.concatenate([ids, self._best[ids[at] != self._best]])  # each once
            if len(ids) > self.keep:
                ids = ids[np.argpartition(self.of(ids), -self.keep)[-self.keep:]]
            self._best = np.sort(ids)

    def _place(self, low: int, high: int) -> None:
        """Room in the dense array for ids low..high, or the sorted arrays past DENSE_SPAN."""
        if self._dense is None:
            if not len(self._ids) and high - low < DENSE_SPAN:
                # A sixteenth more each way: the rarest terms' ids rarely reach the ends of
                # the knowledge base's, and growing the array for the later terms copies it.
                pad = min((high - low) // 16, (DENSE_SPAN - (high - low + 1)) // 2)
                self._base, self._dense = max(0, low - pad), np.zeros(high - max(0, low - pad) + pad + 1)
            return
        size = len(self._dense)
        base, end = min(self._base, low), max(self._base + size, high + 1)
        if end - base > DENSE_SPAN:
            self._ids, self._sums = self.above(0.0)
            self._dense = None
        elif (base, end) != (self._base, self._base + size):
            # A quarter wider at least each time, so a question whose later terms reach ever
            # further copies its scores a few times, not once a term.
            wider = (max(0, min(base, self._base - size // 4)) if base < self._base else base,
                     max(end, self._base + size + size // 4) if end > self._base + size else end)
            if wider[1] - wider[0] <= DENSE_SPAN:
                base, end = wider
            grown = np.zeros(end - base)
            grown[self._base - base:self._base - base + len(self._dense)] = self._dense
            self._base, self._dense = base, grown

    def of(self, ids: np.ndarray) -> np.ndarray:
        """The partial scores of these chunks (sorted ids, each seen)."""
        if self._dense is not None:
            return self._dense[ids - self._base]
        return self._sums[np.searchsorted(self._ids, ids)]

    def above(self, threshold: float) -> tuple[np.ndarray, np.ndarray]:
        """The chunks seen whose partial score reaches the threshold: ids ascending, sums."""
        if self._dense is not None:
            # Every chunk seen has a sum above 0; the rest of the array is 0.
            at = np.flatnonzero(self._dense >= threshold if threshold > 0 else self._dense > 0)
            return at + self._base, self._dense[at]
        keep = self._sums >= threshold
        return self._ids[keep], self._sums[keep]

    def best(self) -> tuple[np.ndarray, np.ndarray]:
        """The `keep` best chunks (ids ascending) and their partial scores."""
        return self._best, self.of(self._best)

    def kth(self, k: int) -> float:
        sums = self.of(self._best)
        return float(np.partition(sums, -k)[-k]) if len(sums) >= k else 0.0


def _contribution(p: Postings, weight: float, average_length: float) -> tuple[np.ndarray, np.ndarray]:
    return p.ids, weight * saturation(p.tfs, p.dls, average_length)


def top(q: Bm25Query, source: PostingSource, k: int) -> Ranked:
    """The k chunks of highest BM25 score (ties by chunk id), exactly.

    1. The rarest terms are read whole until FIRST_READ postings; the k-th partial score is
       a floor for the k-th score (a chunk's score only grows as terms are added).
    2. The commonest terms whose bounds sum below the floor are "optional": a chunk holding
       none of the other terms cannot reach the floor. Every other term is read whole,
       rarest first, the floor rising as it goes.
    3. A chunk found so far whose partial score plus the optional terms' bounds reaches the
       floor is completed from the optional terms' blocks that hold it (_complete); the rest
       cannot enter the top k."""
    if not q.terms or k <= 0:
        return Ranked(np.empty(0, dtype=np.int64), np.empty(0), 0)
    weight = dict(zip(q.terms, q.idfs))
    bound = dict(zip(q.terms, q.bounds))
    unread = list(q.terms)  # rarest first
    scores, read = _Scores(max(k, KNOWN * k)), 0

    def take(terms: list[str]) -> None:
        nonlocal read
        found = source.read(terms)
        for t, p in found.items():
            scores.add(*_contribution(p, weight[t], q.average_length))
        read += sum(len(p.ids) for p in found.values())
        for t in terms:
            unread.remove(t)

    first, budget = [], 0
    for t, df in zip(q.terms, q.dfs):
        if first and budget + df > FIRST_READ:
            break
        first.append(t)
        budget += df
    take(first)
    known = _known_floor(q, source, scores, unread, k, weight) if unread else 0.0
    while unread:
        floor = max(scores.kth(k), known)
        optional = _optional(unread, bound, floor)
        essential = [t for t in unread if t not in optional]
        if not essential:
            break
        take(_surely_read(unread, bound, floor))
    if unread and len(scores.best()[0]):
        ids, sums, more = _complete(q, source, scores, unread, k, weight, floor)
        read += more
    else:  # every term read: every chunk at the k-th score, so that ties go to the lowest ids
        ids, sums = scores.above(_below(scores.kth(k)))
    return _best(ids, sums, k, read)


def _known_floor(q: Bm25Query, source: "PostingSource", scores: "_Scores", unread: list[str], k: int,
                 weight: dict[str, float]) -> float:
    """A floor from whole scores: the KNOWN chunks of best partial score completed with the
    unread terms (from the few blocks that hold them), the k-th of their exact scores. The
    k-th partial score after the rarest terms is often well under the k-th score, so most
    terms would be read whole before the commonest could be left out; this floor lets them
    be left out sooner. The blocks are found through the directory (which _complete reads
    anyway), not probed one term and chunk at a time."""
    best, sums = scores.best()
    if len(best) < k:
        return 0.0
    sums = sums.copy()
    directory = source.directory(unread)
    wanted = {t: _firsts(directory.get(t), _block_of(directory.get(t), best)) for t in unread}
    for t, p in source.read_blocks(wanted).items():
        sums += _added(p, best, weight[t], q.average_length)
    return float(np.partition(sums, -k)[-k])


def _complete(q: Bm25Query, source: "PostingSource", scores: "_Scores", optional: list[str], k: int,
              weight: dict[str, float], floor: float) -> tuple[np.ndarray, np.ndarray, int]:
    """Step 3: the chunks found so far that the optional terms could still lift to the
    k-th score, completed with them; (ids, scores, postings read). Rarest term first: a
    chunk's bound from the term being read is that of the term's block whose range holds its
    id (the block's highest frequency in its shortest chunk; a chunk in the tail's new
    postings gets the term's bound), from the terms after it their own bounds; only the
    blocks that hold a chunk still in the running are read, and a term whose running chunks
    outnumber its blocks is read whole. The floor (top's, so far) rises and the running thin
    as terms come. (Block bounds for every optional term at once, computed first, prune a
    little more but cost more than they save.)"""
    term_bound = dict(zip(q.terms, q.bounds))
    ids, sums = scores.above(_below(floor) - sum(term_bound[t] for t in optional))
    directory = source.directory(optional)
    read, remaining = 0, list(optional)
    for t in optional:  # rarest first
        remaining.remove(t)
        rest = sum(term_bound[u] for u in remaining)
        d, firsts = directory.get(t), None  # None: read the term whole
        # Whole when candidates are in about every block, or the blocks are several knowledge
        # bases', whose ranges overlap (a chunk's block is then not the last one starting before it).
        if d is not None and len(ids) < len(d.first) and np.all(d.first[1:] > d.last[:-1]):
            at = _block_of(d, ids)
            bound = np.where(at >= 0, weight[t] * saturation(d.max_tf, d.min_dl, q.average_length)[np.maximum(at, 0)], 0.0)
            _, in_tail = _found(source.tail_added(t), ids)
            bound = np.where(in_tail, term_bound[t], bound)
            keep = sums + bound + rest >= _below(floor)
            ids, sums, at, bound = ids[keep], sums[keep], at[keep], bound[keep]
            firsts = _firsts(d, at[bound > 0])
            if len(firsts) >= WHOLE * len(d.first):
                firsts = None
        if firsts is None:
            p = source.read([t]).get(t, Postings(*EMPTY))
        else:
            p = source.read_blocks({t: firsts})[t]
        read += len(p.ids)
        scores.add(*_contribution(p, weight[t], q.average_length))
        sums = scores.of(ids)
        floor = max(floor, scores.kth(k))
        keep = sums + rest >= _below(floor)
        ids, sums = ids[keep], sums[keep]
    return ids, sums, read


def _block_of(d: Optional[Directory], ids: np.ndarray) -> np.ndarray:
    """The index of the term's block whose range holds each id (ids ascending), -1 for none;
    blocks of one knowledge base (disjoint ranges: of several, an id held by an earlier,
    wider block gets -1, which only _known_floor asks, where a missed block lowers the floor).
    The blocks' first ids are found among the ids, not each id among the blocks: a
    million-chunk question asks this of ~100,000 ids against ~700 blocks."""
    if d is None or not len(d.first) or not len(ids):
        return np.full(len(ids), -1)
    starts = np.searchsorted(ids, d.first)  # blocks starting at or before each id, counted
    at = np.cumsum(np.bincount(starts, minlength=len(ids) + 1)[:len(ids)]) - 1
    inside = (at >= 0) & (ids <= d.last[np.maximum(at, 0)])
    return np.where(inside, at, -1)


def _firsts(d: Optional[Directory], blocks: np.ndarray) -> np.ndarray:
    """The first ids of these blocks (indexes from _block_of; -1 for none), once each."""
    if d is None:
        return np.empty(0, dtype=np.int64)
    return np.unique(d.first[blocks[blocks >= 0]])


def _found(sorted_ids: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each of ids sits in sorted_ids, and whether it is there."""
    if not len(sorted_ids):
        return np.zeros(len(ids), dtype=np.int64), np.zeros(len(ids), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_ids, ids), len(sorted_ids) - 1)
    return at, sorted_ids[at] == ids


def _added(p: Postings, ids: np.ndarray, weight: float, average_length: float) -> np.ndarray:
    """The term's contribution to each of these chunks (0 where it has no posting)."""
    at, hit = _found(p.ids, ids)
    out = np.zeros(len(ids))
    out[hit] = weight * saturation(p.tfs[at[hit]], p.dls[at[hit]], average_length)
    return out


def _best(ids: np.ndarray, sums: np.ndarray, k: int, read: int) -> Ranked:
    """The k best, ties by chunk id; the sort only over those at or above the k-th score."""
    if len(sums) > k:
        keep = sums >= np.partition(sums, -k)[-k]
        ids, sums = ids[keep], sums[keep]
    order = np.lexsort((ids, -sums))[:k]
    return Ranked(ids[order], sums[order], read)


def _below(floor: float) -> float:
    """The floor a chunk must reach to stay in the running, a hair under the k-th score: a
    chunk tied with it, its sum added up in another order, must not drop out over the last
    bit of a float. At a million chunks (each sentence in ~150 chunks, so ties at the 10th
    are common) pruning at the floor itself lost one of the exact top 10 in 20 questions."""
    return floor - 1e-9 * abs(floor)


def _surely_read(unread: list[str], bound: dict[str, float], floor: float) -> list[str]:
    """The rarest unread term (essential at this floor), and each next one that reading the
    terms before it cannot make optional: one query for them all, with nothing read that
    reading them one at a time would not. A term adds at most its bound to any chunk, so the
    k-th partial score rises by at most the bounds read, and a term stays essential while
    its bound and those of the commoner ones reach the floor so raised. One query for
    several terms costs less than one a term."""
    batch, lifted = [unread[0]], bound[unread[0]]
    rest = sum(bound[t] for t in unread[1:])
    for t in unread[1:]:
        if rest < floor + lifted:
            break
        batch.append(t)
        lifted += bound[t]
        rest -= bound[t]
    return batch


def _optional(unread: list[str], bound: dict[str, float], floor: float) -> set[str]:
    """The largest set of the commonest unread terms whose bounds sum below the floor."""
    optional, total = set(), 0.0
    for t in reversed(unread):  # commonest first
        if total + bound[t] >= _below(floor):
            break
        optional.add(t)
        total += bound[t]
    return optional


def exact_reference(q: Bm25Query, source: PostingSource, k: int) -> Ranked:
    """Every posting of every term, summed: what `top` must equal (tests, benchmarks)."""
    found = source.read(list(q.terms))
    scores = _Scores(k)
    for t, w in zip(q.terms, q.idfs):
        if t in found:
            scores.add(*_contribution(found[t], w, q.average_length))
    return _best(*scores.above(0.0), k, sum(len(p.ids) for p in found.values()))

