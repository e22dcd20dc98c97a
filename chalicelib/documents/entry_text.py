"""An entry's whole text, for seed 001's knowledge_search ("content: the synthesized
answer, truncated if needed"): search finds an entry by its best passage, the model reads
the whole answer, cut to a budget.

The text is rebuilt from the entry's chunks by their offsets into it (chunk.py: each
chunk is text[start_char:end_char] without its outer whitespace; neighbours overlap by
the knowledge base's chunkOverlap). What lay between two chunks that do not overlap is
whitespace, kept as a paragraph break when it was two characters or more, else a space:
the result matches the stored content up to whitespace (its content hash, which ignores
whitespace, is the same; tests/integration/test_entry_text.py)."""
from dataclasses import replace
from itertools import groupby
from typing import Iterable

from chalicelib import limits
from chalicelib.auth import Principal
from chalicelib.retrieval import Passage
from chalicelib.retrieval.context import cut_to_tokens
from chalicelib.embeddings.tokens import count_tokens
from chalicelib.storage import connection, entry_chunks


def rebuild(chunks: Iterable[dict]) -> str:
    """The text of one entry's chunks (in chunk_index order)."""
    text, covered = "", None
    for chunk in chunks:
        content, start, end = chunk["content"], chunk["start_char"], chunk["end_char"]
        if covered is None:
            text, covered = content, end
        elif start >= covered:  # no overlap: whitespace lay between them
            text += ("\n\n" if start - covered >= 2 else " ") + content
            covered = end
        elif end > covered:  # overlapping: only what lies past the text so far
            text += content[covered - start:]
            covered = end
    return text


def whole_contents(principal: Principal, passages: list[Passage],
                   budget: int = limits.KNOWLEDGE_SEARCH_CONTENT_TOKENS) -> list[Passage]:
    """The passages (one per entry) with their entry's whole text as content, each cut to
    `budget` tokens at a sentence (else a word) and ending "..." when cut."""
    if not passages:
        return []
    with connection() as conn:
        rows = entry_chunks.of_entries(conn, principal, sorted({p.knowledge_base_id for p in passages}),
                                       [p.document_id for p in passages])
    texts = {doc_id: rebuild(group) for doc_id, group in groupby(rows, key=lambda r: r["document_id"])}
    return [_fitted(p, texts.get(p.document_id) or p.content, budget) for p in passages]


def _fitted(passage: Passage, text: str, budget: int) -> Passage:
    tokens = count_tokens(text)
    if tokens <= budget:
        return replace(passage, content=text, tokens=tokens, truncated=False)
    cut = cut_to_tokens(text, budget)  # ends with "..." at a sentence as at a word
    return replace(passage, content=cut, tokens=count_tokens(cut), truncated=True)
