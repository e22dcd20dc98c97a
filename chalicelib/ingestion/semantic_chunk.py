"""The semantic chunking strategy: chunks end where the topic changes, not where the size runs out.

The sentences of prose (chunk.py's units, section by section as the fixed strategy
merges them) are embedded with the knowledge base's own model. Between each two adjacent
sentences the text on either side is compared: the mean vector of the WINDOW sentences
before against that of the WINDOW after (TextTiling's block comparison, Hearst 1997: one
sentence alone is a noisy vector, and LangChain's and LlamaIndex's splitters smooth the
same way with their buffer_size of 1). A boundary whose similarity is below the document's
BREAKPOINT_PERCENTILE-th percentile is a topic change and ends a chunk. A run of sentences
longer than chunkTokens is cut at its least similar boundary that leaves a chunk of at
least the floor, and only those cuts carry the overlap: after a topic change the sentences
before are not context for the ones after. Tables and code keep the fixed strategy.

On SciFact (one topic an abstract) it ranked below the fixed strategy at 200 and 500 tokens
(nDCG@10 0.796 against 0.826, 0.777 against 0.800) and level at 64 (docs/benchmarks.md,
"Chunking strategies"): the percentile rule cuts every document at its weakest boundary,
topic change or not. So fixed stays the default.
"""
from collections.abc import Callable, Sequence
from functools import partial

import numpy as np

from chalicelib import limits
from chalicelib.ingestion.chunk import Unit, chunk_document, pack_units
from chalicelib.ingestion.extract import Extracted
from chalicelib.ingestion.model import Chunk

SEMANTIC = "semantic"  # its name in limits.CHUNK_STRATEGIES and knowledge_bases.chunk_strategy
# The knowledge base's provider's embed_documents (tests inject one of their own).
Embed = Callable[[list[str]], Sequence[Sequence[float]]]

# LangChain's SemanticChunker and LlamaIndex's SemanticSplitterNodeParser cut above the 95th
# percentile of adjacent distances by default, i.e. below the 5th percentile of similarity:
# one boundary in twenty. They have no maximum size, so that is all their cutting; here
# chunkTokens cuts long runs anyway (at their weakest boundary), so the breakpoints only
# need to catch clear topic changes, and the stricter of the two usual settings does.
BREAKPOINT_PERCENTILE = 5
WINDOW = 2


def semantic_chunks(extracted: Extracted, chunk_tokens: int, overlap: int, metadata: dict,
                    embed: Embed) -> list[Chunk]:
    """The same Chunk records as chunk_document's (pages, heading trails, offsets), cut
    semantically. A document of more than limits.SEMANTIC_MAX_SENTENCES sentences is cut
    by the fixed strategy (the sentences' embeddings would not fit in the Chunk step)."""
    return chunk_document(extracted, chunk_tokens, overlap, metadata, pack_runs=partial(_pack_runs, embed))


def _pack_runs(embed: Embed, text: str, runs: list[list[Unit]], chunk_tokens: int, overlap: int,
               floor: int) -> list[list[list[Unit]]]:
    count = sum(len(units) for units in runs)
    if count > limits.SEMANTIC_MAX_SENTENCES:
        return [pack_units(units, chunk_tokens, overlap, floor) for units in runs]
    vectors = np.asarray(embed([text[u.start:u.end] for units in runs for u in units]), dtype="float64") \
        if count else np.zeros((0, 1))
    similarities, at = [], 0
    for units in runs:
        similarities.append(boundary_similarities(vectors[at:at + len(units)]))
        at += len(units)
    every = np.concatenate(similarities) if similarities else np.zeros(0)
    # At or below the percentile (two topic changes as sharp as each other both count), unless
    # every boundary is alike (a document of one topic throughout has none).
    threshold = float(np.percentile(every, BREAKPOINT_PERCENTILE)) if len(every) else -1.0
    ceiling = float(every.max()) if len(every) else -1.0
    return [pack_semantic(units, sims, (sims <= threshold) & (sims < ceiling), chunk_tokens, overlap, floor)
            for units, sims in zip(runs, similarities)]


def boundary_similarities(vectors: np.ndarray, window: int = WINDOW) -> np.ndarray:
    """similarities[i]: the cosine between the mean of the (up to) window vectors ending at
    i and the mean of those starting at i + 1."""
    n = len(vectors)
    if n < 2:
        return np.zeros(0)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = vectors / np.where(norms == 0, 1, norms)
    sums = np.vstack([np.zeros(unit.shape[1]), np.cumsum(unit, axis=0)])
    out = np.empty(n - 1)
    for i in range(n - 1):
        lo, hi = max(0, i + 1 - window), min(n, i + 1 + window)
        before, after = sums[i + 1] - sums[lo], sums[hi] - sums[i + 1]
        denominator = np.linalg.norm(before) * np.linalg.norm(after)
        out[i] = before @ after / denominator if denominator else 1.0
    return out.round(6)  # rounding errors would otherwise rank boundaries between alike sentences


def pack_semantic(units: list[Unit], similarities: Sequence[float], breaks: Sequence[bool], chunk_tokens: int,
                  overlap: int, floor: int) -> list[list[Unit]]:
    """Chunks of units: a new one after each break (breaks[i]: between units i and i + 1)
    that leaves both sides at least the floor, and where the next unit would not fit, a cut
    at the least similar boundary of the chunk that leaves it at least the floor."""
    tokens = [u.tokens for u in units]
    after = np.cumsum(tokens[::-1])[::-1].tolist() + [0]  # after[j]: the tokens from unit j on
    groups: list[list[int]] = []
    current: list[int] = []  # indexes into units; the first `carried` repeat the chunk before
    carried = 0

    def size(indexes: list[int]) -> int:
        return sum(tokens[i] for i in indexes)

    for j in range(len(units)):
        if current and breaks[j - 1] and size(current) >= floor and after[j] >= floor:
            groups.append(current)
            current, carried = [], 0
        while current and size(current) + tokens[j] > chunk_tokens:
            # Cut after current[p - 1]: new material in the chunk, at least the floor where possible.
            cuts = range(carried + 1, len(current) + 1)
            allowed = [p for p in cuts if size(current[:p]) >= floor] or [len(current)]
            p = min(allowed, key=lambda q: (similarities[current[q - 1]], -q))
            done, rest = current[:p], current[p:]
            groups.append(done)
            carry: list[int] = []
            for i in reversed(done[max(carried, 1):]):  # never the whole chunk, never units carried already
                if size(carry) + tokens[i] > overlap or size([i, *carry, *rest]) + tokens[j] > chunk_tokens:
                    break
                carry.insert(0, i)
            current, carried = carry + rest, len(carry)
        current.append(j)
    if current:
        groups.append(current)
    return [[units[i] for i in group] for group in groups]
