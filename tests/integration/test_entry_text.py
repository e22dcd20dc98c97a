"""Seed 001's knowledge_search answers an entry's whole text, rebuilt from its chunks, on
real PostgreSQL: overlapping and adjacent chunks, paragraphs, and the budget's cut."""
import pytest

from chalicelib.documents import entries
from chalicelib.documents.entry_text import whole_contents
from chalicelib.embeddings.tokens import count_tokens
from chalicelib.knowledge_bases import create_knowledge_base
from chalicelib.storage import connection

PARAGRAPHS = [" ".join(f"Finding {p}.{i}: the churn of cohort {p} fell by {i} percent after the onboarding change."
                       for i in range(6)) for p in range(5)]
ANSWER = "\n\n".join(PARAGRAPHS)


@pytest.mark.parametrize("overlap", [0, 20])
def test_the_whole_answer_is_rebuilt_from_its_chunks(tenant, overlap):
    principal, _ = tenant
    kb = create_knowledge_base(principal, name=f"Research {overlap}", description="", chunking={"strategy": "fixed", "chunkTokens": 60,
                                                                                     "chunkOverlap": overlap})
    entry = entries.create_entry(principal, kb["id"], title="Churn after onboarding", content=ANSWER, metadata={})
    assert entry.chunks > 4  # many chunks, so the best one alone is a small part of the answer
    found = entries.search_entries(principal, "churn of cohort 3 after onboarding", 1)
    assert len(found) == 1 and found[0].content != ANSWER
    (whole,) = whole_contents(principal, found, budget=10_000)
    assert whole.content == ANSWER and whole.truncated is False
    assert entries.content_hash(whole.content) == entries.content_hash(ANSWER)


def test_an_answer_over_the_budget_is_cut_at_a_sentence_and_says_so(tenant):
    principal, _ = tenant
    kb = create_knowledge_base(principal, name="Research", description="", chunking={"strategy": "fixed", "chunkTokens": 60, "chunkOverlap": 10})
    entries.create_entry(principal, kb["id"], title="Churn after onboarding", content=ANSWER, metadata={})
    found = entries.search_entries(principal, "churn of cohort 3 after onboarding", 1)
    (cut,) = whole_contents(principal, found, budget=100)
    assert cut.truncated is True and cut.content.endswith("percent after the onboarding change....")
    assert ANSWER.startswith(cut.content.removesuffix("...")) and count_tokens(cut.content) <= 100


def test_an_entry_the_caller_cannot_read_keeps_the_passage(tenant):
    """No chunk rows come back for what the caller may not read: the passage stays as found."""
    principal, _ = tenant
    kb = create_knowledge_base(principal, name="Research", description="", chunking={"strategy": "fixed", "chunkTokens": 60, "chunkOverlap": 10})
    entries.create_entry(principal, kb["id"], title="Churn after onboarding", content=ANSWER, metadata={})
    (found,) = entries.search_entries(principal, "churn of cohort 3 after onboarding", 1)
    with connection() as conn:
        conn.execute("DELETE FROM chunks WHERE document_id = %s", (found.document_id,))
    assert whole_contents(principal, [found], budget=10_000) == [found.__class__(**{**found.__dict__})]
