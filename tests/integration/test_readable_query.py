"""Seed 002's worker query over every readable knowledge base of the organisation, on real
PostgreSQL: a knowledge base whose embedding provider fails leaves the others answering."""
import pytest

from chalicelib import freshness
from chalicelib.documents import entries
from chalicelib.errors import Unavailable
from chalicelib.knowledge_bases import create_knowledge_base
from chalicelib.retrieval import SearchRequest
from chalicelib.retrieval.readable import readable_kb_ids, search_readable
from chalicelib.storage import connection


def test_a_failing_provider_leaves_the_other_knowledge_bases_answering(tenant):
    principal, _ = tenant
    good = create_knowledge_base(principal, name="Policies", description="")
    broken = create_knowledge_base(principal, name="Elsewhere", description="")
    entries.create_entry(principal, good["id"], title="refunds", content="Refunds are paid within 30 days.",
                         metadata={})
    entries.create_entry(principal, broken["id"], title="other", content="Refunds within 14 days.", metadata={})
    request = SearchRequest(knowledge_base_ids=("-",), query="refund period", top_k=5)
    both = search_readable(principal, request, readable_kb_ids(principal))
    assert {p.source for p in both} == {"refunds", "other"}
    with connection() as conn:  # a provider this deployment does not have
        conn.execute("UPDATE knowledge_bases SET embedding_provider = 'gone' WHERE id = %s", (broken["id"],))
    freshness.bump(broken["id"])  # as the service's own writes do, so no cached answer stands
    groups = readable_kb_ids(principal)
    assert len(groups) == 2
    found = search_readable(principal, request, groups)
    assert [p.source for p in found] == ["refunds"] and found[0].rank == 1
    with pytest.raises(Unavailable):  # nothing left to answer: the failure is the answer
        search_readable(principal, request, {k: v for k, v in groups.items() if k[0] == "gone"})
