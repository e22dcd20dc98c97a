"""What a search is asked and what it answers, typed. The public JSON of both is
built at the HTTP edge (chalicelib.api.views); agents and entries read the fields."""
from dataclasses import dataclass, field
from typing import Optional

from chalicelib import limits
from chalicelib.storage.filters import SearchFilters

STRATEGIES = ("semantic", "keyword", "hybrid")
PRIORITIES = ("similarity", "recency", "balanced")
# What a passage answers: its whole text, or its first sentences (limits.PASSAGE_SUMMARY_TOKENS).
FIELD_CHOICES = (("content",), ("summary",))


CHUNK_ID_PREFIX = "chunk_"


def public_chunk_id(row_id: int) -> str:
    return f"{CHUNK_ID_PREFIX}{row_id}"


def chunk_row_id(public_id: str) -> Optional[int]:
    """The row of a public chunk id; None when it is not one (a 404, as an absent chunk)."""
    digits = public_id[len(CHUNK_ID_PREFIX):] if public_id.startswith(CHUNK_ID_PREFIX) else ""
    return int(digits) if digits.isascii() and digits.isdigit() and len(digits) <= 18 else None


def section_of(headers: list) -> Optional[str]:
    """The heading trail a chunk sits under, "Install > Debian"; None outside any heading."""
    return " > ".join(h for h in headers if h) or None


@dataclass(frozen=True)
class SearchRequest:
    knowledge_base_ids: tuple[str, ...]
    query: str
    top_k: int = int(limits.TOP_K.default)
    min_score: float = limits.MIN_SCORE.default
    strategy: str = limits.DEFAULT_STRATEGY
    filters: SearchFilters = field(default_factory=SearchFilters)
    max_tokens: int = int(limits.MAX_TOKENS.default)
    prioritize_by: str = limits.DEFAULT_PRIORITY
    debug: bool = False
    debug_query_vector: bool = False  # debug: {"queryVector": true} adds the query's embedding
    hybrid_weights: tuple[float, float] = limits.HYBRID_WEIGHTS  # (semantic, keyword), summing to 1
    fusion: str = "score"  # or "rank": not in the API, the benchmark compares the two
    # re-order the top candidates with Bedrock's Rerank (retrieval/rerank.py); None: as the
    # knowledge bases searched default (their search.rerank)
    rerank: Optional[bool] = None
    fields: tuple[str, ...] = ("content",)  # one of FIELD_CHOICES

    @property
    def summaries(self) -> bool:
        return self.fields == ("summary",)

    @property
    def knowledge_base_id(self) -> str:
        return self.knowledge_base_ids[0]


@dataclass(frozen=True)
class Scores:
    vector: Optional[float]
    keyword: Optional[float]
    fused: Optional[float]


@dataclass(frozen=True)
class AlsoIn:
    """Another document holding a passage's text, or nearly (retrieval/dedupe.py)."""
    document_id: str
    knowledge_base_id: str
    source: str
    path: Optional[str]
    chunk_id: int


@dataclass(frozen=True)
class Passage:
    rank: int
    content: str
    source: str  # the entry's title or the file's name
    path: Optional[str]  # the document's path below kb/{kbId}/ ("guides/install/index.html"); None for entries
    document_id: str
    knowledge_base_id: str
    chunk_index: int
    page: Optional[int]
    headers: list
    similarity: float  # the strategy's score, 0..1 (see search.py)
    metadata: dict
    tokens: int
    truncated: bool
    scores: Scores
    rerank_score: Optional[float] = None  # the reranker's relevance, when the search reranked
    chunk_id: int = 0  # the chunk's row (GET .../chunks/chunk_{id}); 0 only in hand-made passages
    summarised: bool = False  # content holds the passage's first sentences, not all of it
    span: Optional[tuple] = None  # (first, last) chunk index of the parent the content is, if more than the chunk
    # Its document's, as seed 003's chunk metadata names them: size in bytes (a file's), when
    # (ISO 8601) and by whom it was first added (None to another organisation, and for a file
    # dropped into the bucket), and its number of chunks.
    filesize: Optional[int] = None
    uploaded_at: Optional[str] = None
    uploaded_by: Optional[str] = None
    total_chunks: Optional[int] = None
    also_in: tuple[AlsoIn, ...] = ()  # the other documents with the same text or nearly, best first

    @property
    def section(self) -> Optional[str]:
        return section_of(self.headers)


@dataclass(frozen=True)
class Candidate:
    """One row of a candidate list a debug search shows (seed 003's debug view): the
    semantic and keyword lists before fusion, each `pool` deep, with their own scores."""
    chunk_id: int
    document_id: str
    score: float
    text: str  # its first limits.DEBUG_CANDIDATE_TEXT_CHARS characters


@dataclass(frozen=True)
class DebugView:
    semantic: tuple[Candidate, ...] = ()
    keyword: tuple[Candidate, ...] = ()
    query_vectors: tuple[tuple[str, tuple[float, ...]], ...] = ()  # (provider:model, vector), when asked


@dataclass(frozen=True)
class SearchResult:
    query: str
    knowledge_base_ids: tuple[str, ...]
    knowledge_base_names: tuple[str, ...]
    passages: tuple[Passage, ...]
    summary: str
    tokens_used: int
    omitted: int
    cached: bool
    strategy: str
    took_ms: int
    debug: bool = False
    results_cached: bool = False  # answered from the results cache (retrieval/results_cache.py)
    debug_view: Optional[DebugView] = None

    @property
    def knowledge_base_name(self) -> str:
        return ", ".join(self.knowledge_base_names)


@dataclass(frozen=True)
class StoredChunk:
    """One chunk as GET /knowledge-bases/{kbId}/chunks/{chunkId} and a document's chunk list
    answer it: the whole text, and where it starts and ends in its document's text."""
    chunk_id: int
    knowledge_base_id: str
    document_id: str
    content: str
    source: str
    path: Optional[str]
    chunk_index: int
    page: Optional[int]
    headers: list
    metadata: dict
    tokens: int
    start_offset: int
    end_offset: int

    @property
    def section(self) -> Optional[str]:
        return section_of(self.headers)

    @classmethod
    def of(cls, row: dict) -> "StoredChunk":
        """From a row of storage.chunks' CHUNK_COLUMNS."""
        return cls(chunk_id=row["chunk_id"], knowledge_base_id=row["kb_id"], document_id=row["document_id"],
                   content=row["content"], path=row["path"],
                   source=(row["title"] if row["kind"] == "entry" else None) or row["filename"],
                   chunk_index=row["chunk_index"], page=row["page"], headers=row["headers"],
                   metadata=row["metadata"], tokens=row["token_count"], start_offset=row["start_char"],
                   end_offset=row["end_char"])
