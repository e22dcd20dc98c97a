"""An agent's context for one message (seed 004): passages from its knowledge-base
tools and from the knowledge entries the caller may read, within a token budget shared
as the allocation says. Each tool searches as configured (strategy, topK, minScore,
maxTokens, rerank); passages from different tools are ranked together by their cosine
similarity to the message (or their rerank score), which means the same in every
knowledge base. What one source leaves unused of its share goes to the other."""
from dataclasses import dataclass, replace
from typing import Optional

from chalicelib import limits
from chalicelib.agents.invoke import check_arguments
from chalicelib.agents.tools import KNOWLEDGE_BASE, KNOWLEDGE_SEARCH, check_knowledge_search_defaults
from chalicelib.auth import Principal
from chalicelib.documents.entries import entry_url, search_entries
from chalicelib.errors import Invalid, NotFound
from chalicelib.retrieval import Passage, search
from chalicelib.retrieval.context import pack
from chalicelib.storage import agents, connection
from chalicelib.validate import int_field, number_field, refuse_unknown, string_field

SOURCES = tuple(limits.CONTEXT_ALLOCATION)  # knowledgeBases, knowledge


@dataclass(frozen=True)
class ContextRequest:
    message: str
    max_tokens: int
    allocation: dict  # source -> share of max_tokens, summing to 1


@dataclass(frozen=True)
class ContextPassage:
    source: str  # knowledgeBases or knowledge
    title: str  # the file's name or the entry's title
    content: str
    score: float
    tokens: int
    truncated: bool
    document_id: str  # the file's or the entry's
    tool_id: Optional[str] = None
    knowledge_base_id: Optional[str] = None
    url: Optional[str] = None


@dataclass(frozen=True)
class AssembledContext:
    message: str
    max_tokens: int
    passages: tuple[ContextPassage, ...]
    budgets: dict  # source -> {"allocated", "used", "omitted"}

    @property
    def total_tokens(self) -> int:
        return sum(p.tokens for p in self.passages)


def parse_context_request(body: dict) -> ContextRequest:
    refuse_unknown(body, ("message", "maxTokens", "allocation"),
                   "is not a field of a context request; use message, maxTokens, allocation")
    allocation = body.get("allocation")
    if allocation is None:
        shares = dict(limits.CONTEXT_ALLOCATION)
    else:
        if not isinstance(allocation, dict) or not allocation:
            raise Invalid.field("allocation", f"must be an object of shares: {', '.join(SOURCES)}")
        refuse_unknown(allocation, SOURCES, f"is not a source; use {', '.join(SOURCES)}", prefix="allocation.")
        given = {k: number_field(v, f"allocation.{k}", limits.Range(0.0, 1.0, 0.0)) for k, v in allocation.items()}
        if len(given) == 1:  # the other source gets the rest
            (name, share), = given.items()
            given[next(s for s in SOURCES if s != name)] = 1.0 - share
        if abs(sum(given.values()) - 1.0) > 1e-6:
            raise Invalid.field("allocation", "shares must add up to 1")
        shares = given
    return ContextRequest(
        message=string_field(body, "message", required=True, max_length=limits.CONTEXT_MESSAGE_MAX_CHARS),
        max_tokens=int_field(body.get("maxTokens"), "maxTokens", limits.MAX_TOKENS),
        allocation=shares)


def assemble(principal: Principal, agent_id: str, request: ContextRequest) -> AssembledContext:
    with connection() as conn:
        agent = agents.get(conn, principal, agent_id)
    if agent is None:
        raise NotFound.thing("agent", agent_id)
    tools = agent["available_tools"]
    from_knowledge, from_kbs = [], []
    if request.allocation["knowledge"] > 0:  # a source given no share gets nothing, not leftovers
        from_knowledge = _knowledge_passages(principal, next(
            (t for t in tools if t.get("type") == KNOWLEDGE_SEARCH), None), request.message)
    if request.allocation["knowledgeBases"] > 0:
        entries_there = {p.document_id for p in from_knowledge}  # an entry once, as knowledge
        from_kbs = [p for p in _knowledge_base_passages(
            principal, [t for t in tools if t.get("type") == KNOWLEDGE_BASE], request.message)
            if p.document_id not in entries_there]
    budget = {s: int(request.max_tokens * request.allocation[s]) for s in SOURCES}
    budget["knowledgeBases"] = request.max_tokens - budget["knowledge"]  # rounding: nothing lost
    # Each source within its share; then each may use what the other left.
    kept_kn, used_kn, _ = pack(from_knowledge, budget["knowledge"])
    kept_kb, used_kb, omitted_kb = pack(from_kbs, request.max_tokens - used_kn)
    kept_kn, used_kn, omitted_kn = pack(from_knowledge, request.max_tokens - used_kb)
    passages = tuple(replace(f.item, content=f.content, tokens=f.tokens, truncated=f.truncated)
                     for f in kept_kb + kept_kn)
    return AssembledContext(
        message=request.message, max_tokens=request.max_tokens, passages=passages,
        budgets={"knowledgeBases": {"allocated": budget["knowledgeBases"], "used": used_kb, "omitted": omitted_kb},
                 "knowledge": {"allocated": budget["knowledge"], "used": used_kn, "omitted": omitted_kn}})


def _knowledge_base_passages(principal: Principal, tools: list[dict], message: str) -> list[ContextPassage]:
    found = []
    for tool in tools:
        request = check_arguments({"query": message[:limits.QUERY_MAX_CHARS]}, tool,
                                  tool["config"]["knowledgeBaseId"])
        try:
            result = search(principal, replace(request, debug=True))
        except NotFound:  # its knowledge base was deleted, or is hidden from this caller
            continue
        for p in result.passages:
            found.append(_passage("knowledgeBases", p, _score(p), tool_id=tool["id"],
                                  knowledge_base_id=p.knowledge_base_id))
    return sorted(found, key=lambda p: -p.score)


def _knowledge_passages(principal: Principal, tool: Optional[dict], message: str) -> list[ContextPassage]:
    config = (tool or {}).get("config") or {}
    _, min_score = check_knowledge_search_defaults(None, config.get("defaultMinScore"))
    found = search_entries(principal, message[:limits.QUERY_MAX_CHARS], limits.CONTEXT_KNOWLEDGE_RESULTS,
                           min_score=min_score)
    return [_passage("knowledge", p, p.scores.vector or 0.0, url=entry_url(p.document_id),
                     tool_id=(tool or {}).get("id")) for p in found]


def _score(passage: Passage) -> float:
    """Comparable across tools: the rerank score when reranked, else the cosine similarity."""
    if passage.rerank_score is not None:
        return passage.rerank_score
    return passage.scores.vector or 0.0


def _passage(source: str, passage: Passage, score: float, **where) -> ContextPassage:
    return ContextPassage(source=source, title=passage.source, content=passage.content, score=round(score, 6),
                          tokens=passage.tokens, truncated=False, document_id=passage.document_id, **where)


def render(context: AssembledContext) -> str:
    """The passages as one text for a system prompt, each with where it came from."""
    lines = []
    for i, p in enumerate(context.passages, start=1):
        where = p.url or p.title
        lines.append(f"[{i}] {p.title} ({where})\n{p.content}")
    return "\n\n".join(lines)
