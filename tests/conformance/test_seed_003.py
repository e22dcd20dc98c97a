"""Seed 003 (a knowledge-base system for agents): its PermissionLevel as its code spells it
('organization', and "Organization" as its extraction prompt writes it), its DocumentChunk
metadata (filesize, uploadedAt, uploadedBy, totalChunks) on every passage, and its debug
view's candidates, each with its text beside its score."""
import base64
import secrets

import pytest

from tests.cli.conftest import Cli, clean_env
from tests.e2e.conftest import new_key, wait_for_status

pytestmark = pytest.mark.e2e

MANUAL = ("# Heat pump manual\n\nThe heat pump defrosts its outdoor coil every ninety minutes in frost."
          " During a defrost the fan stops and steam rises from the unit; this is normal.\n")


def data(response, status=200):
    assert response.status_code == status, response.text
    return response.json()["data"]


@pytest.fixture(scope="module")
def kb(api):
    """Public: another organisation searches it too (its first user is the organisation's admin)."""
    created = data(api.call("POST", "/knowledge-bases", {"name": f"Seed 003 {secrets.token_hex(3)}",
                                                         "visibility": "public"}), 201)
    yield created
    api.call("DELETE", f"/knowledge-bases/{created['id']}")


@pytest.fixture(scope="module")
def manual(api, kb):
    data(api.call("POST", f"/knowledge-bases/{kb['id']}/documents", {
        "path": "manuals/heat-pump.md", "content": base64.b64encode(MANUAL.encode()).decode()}), 202)
    document, _ = wait_for_status(api, kb["id"], "manuals/heat-pump.md", wanted=("PROCESSED",), timeout=180)
    return document


def _search(api, kb, query, **options):
    return data(api.call("POST", f"/knowledge-bases/{kb['id']}/search", {"query": query, **options}))


def _passage_of(answer, document):
    return next(p for p in answer["results"] if p["documentId"] == document["id"])


# PermissionLevel

@pytest.mark.parametrize("spelling", ["organization", "Organization", "ORGANISATION", " org "])
def test_the_organization_level_is_read_in_any_spelling_and_stored_as_one(api, colleague, kb, spelling):
    title = f"Defrost rule {secrets.token_hex(3)}"
    entry = data(api.call("POST", f"/knowledge-bases/{kb['id']}/entries", {
        "title": title, "content": f"{title}: the fan stops while the coil defrosts.", "level": spelling}), 201)
    assert entry["level"] == "organisation"
    # What the level means holds too: a colleague reads it.
    seen = data(colleague.call("GET", f"/knowledge-bases/{kb['id']}/documents/{entry['id']}"))
    assert seen["id"] == entry["id"]


def test_a_level_is_changed_in_the_seeds_spelling_and_a_wrong_one_is_named(api, kb):
    entry = data(api.call("POST", f"/knowledge-bases/{kb['id']}/entries", {
        "title": "Steam", "content": f"Steam from the unit in frost is normal {secrets.token_hex(3)}.",
        "level": "Individual"}), 201)
    assert entry["level"] == "individual"
    for spelling, stored in (("Organization", "organisation"), ("PUBLIC", "public"), ("individual", "individual")):
        changed = data(api.call("PATCH", f"/knowledge-bases/{kb['id']}/entries/{entry['id']}", {"level": spelling}))
        assert changed["level"] == stored
    for body in ({"level": "team"}, {"level": 3}):
        refused = api.call("PATCH", f"/knowledge-bases/{kb['id']}/entries/{entry['id']}", body)
        assert refused.status_code == 400 and refused.json()["error"]["message"].startswith("level: must be one of")


def test_the_cli_posts_an_entry_at_the_seeds_level(local_env, org, kb, tmp_path):
    cli = Cli(env=clean_env(KB_API_URL=local_env["KB_API_URL"], KB_API_KEY=new_key(local_env, org, "seed-user")),
              cwd=tmp_path)
    entry = cli.json("entries", "add", "--kb", kb["id"], "--title", "Fan", "--level", "Organization",
                     "--content", f"The fan restarts after a defrost {secrets.token_hex(3)}.")
    assert entry["level"] == "organisation"


# DocumentChunk.metadata

def test_every_passage_names_its_files_size_upload_and_chunk_count(api, kb, manual):
    answer = _search(api, kb, "why does steam rise from the heat pump", strategy="keyword")
    meta = _passage_of(answer, manual)["metadata"]
    assert (meta["filesize"], meta["uploadedAt"], meta["uploadedBy"], meta["totalChunks"]) == (
        len(MANUAL.encode()), manual["createdAt"], kb["ownerId"], manual["chunks"])
    # The results cache answers the same passage.
    again = _search(api, kb, "why does steam rise from the heat pump", strategy="keyword")
    assert again["metadata"]["resultsCached"] is True and _passage_of(again, manual)["metadata"] == meta


def test_another_organisation_reads_the_facts_but_not_who_uploaded(stranger, kb, manual):
    passage = _passage_of(_search(stranger, kb, "why does steam rise from the heat pump", strategy="keyword"), manual)
    assert passage["metadata"]["filesize"] == len(MANUAL.encode()) and passage["metadata"]["uploadedBy"] is None


def test_a_file_dropped_into_the_bucket_has_no_uploader(api, kb, s3, local_env):
    s3.put_object(Bucket=local_env["KB_BUCKET"], Key=f"kb/{kb['id']}/dropped/frost.md",
                  Body=b"# Frost\n\nIcicles on the drain pan melt at the next defrost cycle.\n")
    document, _ = wait_for_status(api, kb["id"], "dropped/frost.md", wanted=("PROCESSED",), timeout=180)
    passage = _passage_of(_search(api, kb, "icicles on the drain pan", strategy="keyword"), document)
    assert passage["metadata"]["uploadedBy"] is None and passage["metadata"]["uploadedAt"] == document["createdAt"]


def test_an_agents_tool_result_carries_the_same_metadata(api, kb, manual):
    agent = data(api.call("POST", "/agents", {"name": f"Seed 003 agent {secrets.token_hex(3)}"}), 201)
    try:
        tool = data(api.call("POST", f"/agents/{agent['id']}/knowledge-base-tools",
                             {"quickAdd": True, "knowledgeBaseId": kb["id"]}))["tool"]
        result = api.call("POST", f"/agents/{agent['id']}/tools/{tool['id']}/invoke",
                          {"query": "steam rises from the heat pump during a defrost"}).json()
        hit = next(r for r in result["results"] if r["path"] == "manuals/heat-pump.md")
        assert (hit["metadata"]["filesize"], hit["metadata"]["uploadedBy"], hit["metadata"]["totalChunks"]) == (
            len(MANUAL.encode()), kb["ownerId"], manual["chunks"])
    finally:
        api.call("DELETE", f"/agents/{agent['id']}")


# debugKnowledgeSearch

def test_the_debug_candidates_carry_their_text_beside_their_score(api, kb, manual):
    answer = _search(api, kb, "steam rises from the unit in frost", strategy="hybrid", debug=True)
    candidates = answer["metadata"]["debug"]["candidates"]
    assert candidates["semantic"] and candidates["keyword"]
    texts = {p["chunkId"]: p["content"] for p in answer["results"]}
    for candidate in candidates["semantic"] + candidates["keyword"]:
        assert isinstance(candidate["score"], float) and 0 < len(candidate["text"]) <= 200
        if candidate["chunkId"] in texts:
            assert texts[candidate["chunkId"]].startswith(candidate["text"].removesuffix("..."))
    top = answer["results"][0]
    assert any(c["chunkId"] == top["chunkId"] and c["text"] for c in candidates["semantic"])
