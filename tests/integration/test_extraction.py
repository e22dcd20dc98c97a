"""Knowledge extraction (issue 16) on real PostgreSQL, through the real `openai` client
and boto3's Converse against local servers that speak those protocols."""
import json
import secrets

import pytest

from chalicelib.agents import service
from chalicelib.api.views import job_view
from chalicelib.auth import issue_key
from chalicelib.documents import entries
from chalicelib.errors import BadUpstream, Forbidden, Unavailable
from chalicelib.knowledge import extract, jobs, parse_conversation
from chalicelib.knowledge_bases import create_knowledge_base
from chalicelib.storage import connection
from chalicelib.storage import extraction_jobs as job_rows
from tests.integration.bedrock_server import ConverseServer
from tests.integration.conftest import org_name
from tests.integration.openai_server import OpenAIChatServer

CONVERSATION = [
    {"role": "user", "content": "Remind me: when do we deploy to production, and how do I like my reports?"},
    {"role": "assistant", "content": "Production deploys happen every Tuesday after the change review."
                                     " You asked for reports as one-page PDFs."},
    {"role": "user", "content": "Right. And we decided to move the billing service to Aurora in March."},
]
ITEMS = {"items": [
    {"title": "Deploy day", "content": "Production deploys happen on Tuesdays after the change review.",
     "type": "procedure", "level": "organisation", "confidence": 0.95},
    {"title": "Report format", "content": "The user wants reports as one-page PDF files.",
     "type": "preference", "level": "individual", "confidence": 0.9},
    {"title": "Billing database", "content": "The billing service moves to Aurora PostgreSQL in March.",
     "type": "decision", "level": "public", "confidence": 0.85},
    {"title": "Weather", "content": "It might rain later today.", "type": "fact", "level": "individual",
     "confidence": 0.2},
]}


@pytest.fixture
def team(service_env):
    org = f"org-{secrets.token_hex(4)}"
    admin, _ = issue_key(org, "ann")
    editor, _ = issue_key(org, "ed", role="editor")
    kb = create_knowledge_base(editor, name="Team knowledge", description="", visibility="org")
    existing = entries.create_entry(editor, kb["id"], title="Deploys",
                                    content="Production deploys happen every Tuesday after the change review.",
                                    metadata={})
    agent = service.create_agent(editor, name="Assistant", description="", tools=[])
    return {"admin": admin, "editor": editor, "kb": kb, "existing": existing, "agent": agent}


@pytest.fixture
def openai_llm(monkeypatch):
    def serve(*answers):
        server = OpenAIChatServer([a if isinstance(a, str) else json.dumps(a) for a in answers]).__enter__()
        monkeypatch.setenv("LLM_PROVIDER", "openai")
        monkeypatch.setenv("LLM_MODEL", "gpt-local")
        monkeypatch.setenv("LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("LLM_API_KEY", "sk-local")
        servers.append(server)
        return server
    servers = []
    yield serve
    for server in servers:
        server.__exit__(None, None, None)


def _conversation(kb_id, **extra):
    return parse_conversation({"messages": CONVERSATION, "knowledgeBaseId": kb_id, **extra})


def _entries(kb_id) -> dict:
    with connection() as conn:
        rows = conn.execute("SELECT id, level, entry_type, confidence, provenance, agent_id, history, superseded_by,"
                            " chunk_count FROM documents"
                            " WHERE kb_id = %s AND kind = 'entry'", (kb_id,)).fetchall()
    return {r["id"]: r for r in rows}


def test_without_a_model_the_answer_is_llm_not_configured(team, monkeypatch):
    monkeypatch.delenv("LLM_PROVIDER", raising=False)
    with pytest.raises(Unavailable) as err:
        extract(team["editor"], team["agent"]["id"], _conversation(team["kb"]["id"]))
    assert err.value.code == "LLM_NOT_CONFIGURED"


def test_items_are_created_merged_or_dropped_and_levels_bounded_by_role(team, openai_llm):
    server = openai_llm(ITEMS)
    result = extract(team["editor"], team["agent"]["id"], _conversation(team["kb"]["id"])).as_json()
    assert result["counts"] == {"created": 2, "merged": 1, "updated": 0, "dropped": 1}
    assert result["merged"][0]["id"] == team["existing"].id and result["merged"][0]["similarity"] >= 0.8
    assert result["dropped"][0]["content"] == "It might rain later today."
    stored = _entries(team["kb"]["id"])
    assert len(stored) == 3  # the existing one and two new; the deploy day merged, not duplicated
    merged = stored[team["existing"].id]
    assert merged["provenance"][0]["agentId"] == team["agent"]["id"]
    assert merged["provenance"][0]["content"] == ITEMS["items"][0]["content"]
    created = {c["title"]: c for c in result["created"]}
    assert created["Billing database"]["level"] == "organisation"  # an editor publishes nothing
    assert created["Report format"]["level"] == "individual" and created["Report format"]["type"] == "preference"
    row = stored[created["Billing database"]["id"]]
    assert row["entry_type"] == "decision" and row["agent_id"] == team["agent"]["id"]
    # The model got the conversation through the real client, in the chat protocol.
    sent = server.requests[0]
    assert sent["model"] == "gpt-local" and sent["messages"][0]["role"] == "system"
    assert "Aurora in March" in sent["messages"][-1]["content"]
    # What was learnt is found by knowledge_search: the organisation's by a colleague.
    colleague, _ = issue_key(org_name(team["editor"]), "cy", role="editor")
    found = entries.search_entries(colleague, "which database will billing use?", 5)
    assert [p.document_id for p in found][:1] == [created["Billing database"]["id"]]
    assert created["Report format"]["id"] not in [p.document_id for p in
                                                   entries.search_entries(colleague, "report format pdf", 5)]
    # The same conversation again: everything merges into what is there.
    openai_llm(ITEMS)
    again = extract(team["editor"], team["agent"]["id"], _conversation(team["kb"]["id"])).as_json()
    assert again["counts"] == {"created": 0, "merged": 3, "updated": 0, "dropped": 1}
    assert len(_entries(team["kb"]["id"])) == 3


def test_an_admin_may_publish_and_min_confidence_is_the_callers(team, openai_llm):
    openai_llm(ITEMS)
    result = extract(team["admin"], team["agent"]["id"],
                                     _conversation(team["kb"]["id"], minConfidence=0.88)).as_json()
    # The editor's deploy entry was posted without a level (individual): the admin does not
    # read it, so nothing merges into it.
    assert {c["title"]: c["level"] for c in result["created"]} == {"Report format": "individual",
                                                                   "Deploy day": "organisation"}
    assert {d["content"] for d in result["dropped"]} == {"It might rain later today.",
                                                         ITEMS["items"][2]["content"]}
    openai_llm(ITEMS)
    published = extract(team["admin"], team["agent"]["id"], _conversation(team["kb"]["id"])).as_json()
    assert {c["title"]: c["level"] for c in published["created"]} == {"Billing database": "public"}


def test_malformed_output_is_asked_again_once_then_refused_with_nothing_stored(team, openai_llm):
    before = _entries(team["kb"]["id"])
    server = openai_llm("Sure! Here is what I found: deploys on Tuesdays.", {"items": [{"content": "x"}]})
    with pytest.raises(BadUpstream) as err:
        extract(team["editor"], team["agent"]["id"], _conversation(team["kb"]["id"]))
    assert err.value.code == "LLM_OUTPUT_INVALID" and "confidence" in err.value.message
    assert len(server.requests) == 2 and "not the JSON object" in server.requests[1]["messages"][-1]["content"]
    assert _entries(team["kb"]["id"]) == before
    # Malformed once, then right: stored.
    server = openai_llm("not json", "```json\n" + json.dumps(ITEMS) + "\n```")
    result = extract(team["editor"], team["agent"]["id"], _conversation(team["kb"]["id"])).as_json()
    # Two asks for the items, then one comparison for the deploy item near an entry (the
    # items again are no decision: it counts as existing, a sighting).
    assert len(server.requests) == 3 and result["counts"]["created"] == 2 and result["counts"]["merged"] == 1


def test_viewers_and_strangers_extract_nothing(team, openai_llm):
    openai_llm(ITEMS)
    viewer, _ = issue_key(org_name(team["editor"]), "vic", role="viewer")
    with pytest.raises(Exception) as err:
        extract(viewer, team["agent"]["id"], _conversation(team["kb"]["id"]))
    assert err.value.code == "NOT_FOUND"  # a viewer manages no agent
    stranger, _ = issue_key(f"org-{secrets.token_hex(4)}", "zed")
    own_agent = service.create_agent(stranger, name="Mine", description="", tools=[])
    with pytest.raises(Exception) as err:
        extract(stranger, own_agent["id"], _conversation(team["kb"]["id"]))
    assert err.value.code == "NOT_FOUND"  # another organisation's knowledge base
    private = create_knowledge_base(team["admin"], name="Private", description="")
    with pytest.raises(Exception) as err:  # the admin's private knowledge base: not even seen
        extract(team["editor"], team["agent"]["id"], _conversation(private["id"]))
    assert err.value.code == "NOT_FOUND"
    theirs = create_knowledge_base(stranger, name="Open", description="", visibility="public")
    with pytest.raises(Forbidden):  # another organisation's public one: searched, not written
        extract(team["editor"], team["agent"]["id"], _conversation(theirs["id"]))


def test_through_bedrock_converse(team, monkeypatch, local_env):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"):
        monkeypatch.setenv(name, local_env[name])
    with ConverseServer([json.dumps(ITEMS)]) as server:
        monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", server.endpoint_url)
        monkeypatch.setenv("LLM_PROVIDER", "bedrock")
        monkeypatch.setenv("LLM_MODEL", "anthropic.claude-3-haiku-20240307-v1:0")
        result = extract(team["editor"], team["agent"]["id"], _conversation(team["kb"]["id"])).as_json()
    assert result["counts"] == {"created": 2, "merged": 1, "updated": 0, "dropped": 1}
    assert result["model"] == "bedrock:anthropic.claude-3-haiku-20240307-v1:0"
    assert server.paths[0].endswith("/converse") and server.requests[0]["system"][0]["text"].startswith("You extract")


def test_a_job_runs_once_and_keeps_its_result(team, openai_llm):
    openai_llm(ITEMS)
    conversation = _conversation(team["kb"]["id"])
    with connection() as conn:
        job = job_rows.insert(conn, team["editor"], job_id=f"job_{secrets.token_hex(8)}",
                              agent_id=team["agent"]["id"], request=conversation.as_json())
    assert jobs.get(team["editor"], team["agent"]["id"], job["id"])["status"] == "PENDING"
    assert jobs.run({"jobId": job["id"], "orgId": team["editor"].org_id})["status"] == "SUCCEEDED"
    assert jobs.run({"jobId": job["id"], "orgId": team["editor"].org_id})["ran"] is False
    done = job_view(jobs.get(team["editor"], team["agent"]["id"], job["id"]))
    assert done["status"] == "SUCCEEDED" and done["result"]["counts"] == {"created": 2, "merged": 1, "updated": 0, "dropped": 1}
    stranger, _ = issue_key(f"org-{secrets.token_hex(4)}", "zed")
    with pytest.raises(Exception) as err:
        jobs.get(stranger, team["agent"]["id"], job["id"])
    assert err.value.code == "NOT_FOUND"


class RoleChangingChatServer(OpenAIChatServer):
    """Answers as OpenAIChatServer, after making `user` of `org` a `role` on the first request:
    an admin changing a role while a job waits on its model."""

    def __init__(self, answers, org: str, user: str, role: str):
        super().__init__(answers)
        self.change = (org, user, role)

    def reply(self, body: dict) -> tuple[int, dict]:
        if self.change:
            org, user, role = self.change
            issue_key(org, user, role=role)
            self.change = None
        return super().reply(body)


@pytest.mark.parametrize("now, written", [("viewer", {}), ("editor", {"Billing database": "organisation"})])
def test_a_job_writes_with_the_role_its_user_holds_when_it_writes(team, monkeypatch, now, written):
    """Made a viewer while the job's model answered: the job writes nothing. An admin made an
    editor: what it writes is bounded by the editor's widest level, not the admin's."""
    before = "editor" if now == "viewer" else "admin"
    user = {"editor": "ed", "admin": "ann"}[before]
    principal = team["editor"] if before == "editor" else team["admin"]
    agent = service.create_agent(principal, name="Own assistant", description="", tools=[])
    with RoleChangingChatServer([json.dumps(ITEMS)], org_name(principal), user, now) as server:
        monkeypatch.setenv("LLM_PROVIDER", "openai")
        monkeypatch.setenv("LLM_MODEL", "gpt-local")
        monkeypatch.setenv("LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("LLM_API_KEY", "sk-local")
        with connection() as conn:
            job = job_rows.insert(conn, principal, job_id=f"job_{secrets.token_hex(8)}",
                                  agent_id=agent["id"], request=_conversation(team["kb"]["id"]).as_json())
        count = len(_entries(team["kb"]["id"]))
        assert jobs.run({"jobId": job["id"], "orgId": principal.org_id})["status"] == "SUCCEEDED"
    result = jobs.get(principal, agent["id"], job["id"])["result"]
    created = {c["title"]: c["level"] for c in result["created"]}
    if now == "viewer":
        assert result["counts"]["created"] == result["counts"]["merged"] == 0, result
        assert len(_entries(team["kb"]["id"])) == count
        assert [d["reason"][:12] for d in result["dropped"]] == ["not written:"] * 4, result
    else:
        assert {t: created.get(t) for t in written} == written, result


def test_a_job_whose_function_ended_without_a_word_is_failed_by_the_sweep(team):
    from chalicelib.documents.reconcile import fail_stalled_extractions

    conversation = _conversation(team["kb"]["id"])
    with connection() as conn:
        stalled, fresh = (job_rows.insert(conn, team["editor"], job_id=f"job_{secrets.token_hex(8)}",
                                          agent_id=team["agent"]["id"], request=conversation.as_json())
                          for _ in range(2))
        job_rows.claim(conn, stalled["id"])  # RUNNING, then its function died
        conn.execute("UPDATE extraction_jobs SET updated_at = now() - interval '30 minutes' WHERE id = %s",
                     (stalled["id"],))
    assert stalled["id"] in fail_stalled_extractions()["failed"]
    ended = job_view(jobs.get(team["editor"], team["agent"]["id"], stalled["id"]))
    assert ended["status"] == "FAILED" and ended["error"]["code"] == "JOB_ENDED"
    assert jobs.get(team["editor"], team["agent"]["id"], fresh["id"])["status"] == "PENDING"  # not yet


class DecidingChatServer(OpenAIChatServer):
    """Answers the extraction with `items`, and each comparison (seed 003's prompt) with what
    `decide(new_knowledge, existing_texts)` returns."""

    def __init__(self, items: dict, decide):
        super().__init__([json.dumps(items)])
        self.decide = decide

    def reply(self, body: dict) -> tuple[int, dict]:
        if not body["messages"][0]["content"].startswith("You compare"):
            return super().reply(body)
        asked = body["messages"][-1]["content"]
        new = asked.split("# New Knowledge\n", 1)[1].split("\n\n# Existing Similar Knowledge", 1)[0]
        existing = asked.split("# Existing Similar Knowledge\n", 1)[1].split("\n---\n")
        text = json.dumps(self.decide(new, existing))
        return 200, {"id": "chatcmpl-local", "object": "chat.completion", "created": 0, "model": body["model"],
                     "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
                     "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


def test_the_model_decides_new_existing_or_merged_and_a_merge_is_a_new_version(team, monkeypatch):
    """Issue 31 item 2: near entries (cosine >= 0.8, top 5) go to the model with the seed's
    prompt; `new` stores the item, `existing` records a sighting, `merged` rewrites an entry
    (re-embedded, found by keyword search under its new words) and supersedes the others it
    names, whose text stays in the entry's history while they leave search."""
    kb, editor = team["kb"], team["editor"]
    second = entries.create_entry(editor, kb["id"], title="Deploys",
                                  content="Production deploys happen every Tuesday after the change review is done.",
                                  metadata={})
    items = {"items": [
        {"title": "Deploy day", "content": "Production deploys happen on Tuesdays after the change review.",
         "type": "procedure", "level": "individual", "confidence": 0.95},
        {"title": "Deploy freeze",
         "content": "Production deploys happen every Tuesday after the change review, except during the freeze.",
         "type": "procedure", "level": "individual", "confidence": 0.9},
        {"title": "Deploy rollback",
         "content": "Production deploys happen on Tuesdays after the change review, never during the December"
                    " freeze; rollbacks take ten minutes.",
         "type": "procedure", "level": "individual", "confidence": 0.9}]}
    seen = []

    def decide(new, existing):
        seen.append((new, existing))
        if "rollbacks" in new:
            return {"result": "new", "reasoning": "rollback is another matter"}
        if "freeze" in new:
            return {"result": "merged", "reasoning": "one rule", "to_remove_ids": [1, 2],
                    "merged_content": "Production deploys happen on Tuesdays after the change review,"
                                      " never during the year-end freeze."}
        return {"result": "existing", "reasoning": "said already"}

    with DecidingChatServer(items, decide) as server:
        for name, value in (("LLM_PROVIDER", "openai"), ("LLM_MODEL", "gpt-local"), ("LLM_BASE_URL", server.base_url),
                            ("LLM_API_KEY", "sk-local")):
            monkeypatch.setenv(name, value)
        result = extract(editor, team["agent"]["id"], _conversation(kb["id"])).as_json()
    assert result["counts"] == {"created": 1, "merged": 1, "updated": 1, "dropped": 0}
    # The first two comparisons saw both near entries, whole; the third, after the merge, one fewer.
    assert [len(existing) for _, existing in seen] == [2, 2, 1]
    assert any("change review is done" in text for text in seen[0][1])
    assert result["merged"][0]["decision"] == {"result": "existing", "reasoning": "said already"}
    assert result["created"][0]["title"] == "Deploy rollback"
    updated = result["updated"][0]
    gone = updated["superseded"][0]
    assert {updated["id"], gone} == {team["existing"].id, second.id}
    stored = _entries(kb["id"])
    assert [h["reason"] for h in stored[updated["id"]]["history"]] == ["merged", "superseded"]
    assert stored[gone]["superseded_by"] == updated["id"] and stored[gone]["chunk_count"] == 0
    assert "Tuesday" in stored[updated["id"]]["history"][1]["content"]
    # Search finds the merged text by its new words, and the superseded entry no longer.
    from chalicelib.retrieval import SearchRequest, search
    found = search(editor, SearchRequest(knowledge_base_ids=(kb["id"],), query="year-end", top_k=5,
                                         strategy="keyword"))
    assert [p.document_id for p in found.passages] == [updated["id"]]
    assert "year-end freeze" in found.passages[0].content
    semantic = search(editor, SearchRequest(knowledge_base_ids=(kb["id"],), query="when do production deploys happen",
                                            top_k=10, strategy="semantic"))
    assert gone not in {p.document_id for p in semantic.passages}


def test_a_merge_rewrites_only_what_its_writer_could_change_by_hand(team):
    """A model's `merged` never lets an editor rewrite or supersede another user's entry, nor
    carry an item's knowledge to a wider level than its own (the review of issue 31)."""
    from chalicelib.documents.entries import rewrite_entry

    kb, editor, admin = team["kb"], team["editor"], team["admin"]
    theirs = entries.create_entry(admin, kb["id"], title="Policy", content="Deploys need two approvals.",
                                  metadata={}, level="organisation")
    mine = entries.create_entry(editor, kb["id"], title="Mine", content="Deploys need one approval.", metadata={})
    merged = "Deploys need one approval, and two for database changes."
    assert rewrite_entry(editor, kb, theirs.id, title="x", content=merged, level="organisation", provenance={}) is None
    assert rewrite_entry(editor, kb, mine.id, title="x", content=merged, level="individual", provenance={},
                         supersede=(theirs.id,)) is None
    assert rewrite_entry(admin, kb, theirs.id, title="x", content=merged, level="individual", provenance={}) is None
    stored = _entries(kb["id"])
    assert stored[theirs.id]["history"] == [] and stored[theirs.id]["superseded_by"] is None
    assert stored[mine.id]["history"] == []
    assert rewrite_entry(editor, kb, mine.id, title="Mine", content=merged, level="individual", provenance={}) is not None
    assert [h["content"] for h in _entries(kb["id"])[mine.id]["history"]] == ["Deploys need one approval."]
