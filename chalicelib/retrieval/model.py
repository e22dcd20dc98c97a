"""What a search is asked and what it answers, typed. The public JSON of both is
built at the HTTP edge (chalicelib.api.views); agents and entries read the fields."""
from dataclasses import dataclass, field
from typing import Optional

from chalicelib import limits
from chalicelib.storage.filters import SearchFilters

STRATEGIES = ("semantic", "keyword", "hybrid")
PRIORITIES = ("similarity", "recency", "balanced")


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
    hybrid_weights: tuple[float, float] = limits.HYBRID_WEIGHTS  # (semantic, keyword), summing to 1
    fusion: str = "score"  # or "rank": not in the API, the benchmark compares the two
    rerank: bool = False  # re-order the top candidates with Bedrock's Rerank (retrieval/rerank.py)

    @property
    def knowledge_base_id(self) -> str:
        return self.knowledge_base_ids[0]


@dataclass(frozen=True)
class Scores:
    vector: Optional[float]
    keyword: Optional[float]
    fused: Optional[float]


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

    @property
    def section(self) -> Optional[str]:
        """The heading trail the passage sits under, "Install > Debian"; None outside any heading."""
        return " > ".join(h for h in self.headers if h) or None


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

    @property
    def knowledge_base_name(self) -> str:
        return ", ".join(self.knowledge_base_names)
