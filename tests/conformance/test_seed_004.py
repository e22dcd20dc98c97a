"""Seed 004 (document embeddings): its CLI as its scripts call it (`docs upload
--knowledge-base ID -r DIR`, printing `✓ Uploaded: FILE` a file), its statuses as its code
spells them (`completed`, lower case), its Document's CreatedBy and OriginalURL, with
a document added from a URL that the service fetches from a local web server, its
repository's chunks by document with ChunkMetadata's offsets, and an agent's knowledge
config as the one mapping its Agent config holds."""
import base64
import json
import secrets
import time
from pathlib import Path

import pytest

from tests.cli.conftest import Cli, clean_env
from tests.e2e.conftest import list_documents, new_key, wait_for_status
from tests.local_http import LocalPageServer

pytestmark = pytest.mark.e2e

PAGE = (b"<html><head><title>Pump handbook</title></head><body><nav><a href='/'>Home</a></nav><main>"
        b"<h1>Resetting the heat pump</h1><p>Hold the service button for ten seconds until the amber light"
        b" blinks twice, then release it and wait for the compressor to restart on its own.</p></main></body></html>")
NOTES = b"# Maintenance notes\n\nThe filter is cleaned every three months with warm water and no detergent.\n"


def data(response, status=200):
    assert response.status_code == status, response.text
    return response.json()["data"]


@pytest.fixture(scope="module")
def kb(api):
    created = data(api.call("POST", "/knowledge-bases", {"name": f"Seed 004 {secrets.token_hex(3)}",
                                                         "visibility": "org"}), 201)
    yield created
    api.call("DELETE", f"/knowledge-bases/{created['id']}")


@pytest.fixture(scope="module")
def seed_cli(local_env, org, tmp_path_factory) -> Cli:
    key = new_key(local_env, org, "seed-user")
    return Cli(env=clean_env(KB_API_URL=local_env["KB_API_URL"], KB_API_KEY=key),
               cwd=tmp_path_factory.mktemp("seed-004-cwd"))


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("seed-004-docs")
    (root / "guides").mkdir()
    (root / "guides" / "notes.md").write_bytes(NOTES)
    (root / "faq.txt").write_text("Q: How often is the filter cleaned?\nA: Every three months, with warm water.\n")
    return root


@pytest.fixture(scope="module")
def uploaded(seed_cli, kb, folder):
    """The seed's script: `docs upload --knowledge-base ID -r DIR`, stdout piped."""
    done = seed_cli.run("docs", "upload", "--knowledge-base", kb["id"], "-r", str(folder))
    return done


def test_docs_upload_takes_the_seeds_flags_and_prints_its_lines(uploaded, folder):
    lines = uploaded.stdout.splitlines()
    assert sorted(line for line in lines if line.startswith("✓ ")) == sorted(
        f"✓ Uploaded: {folder / name}" for name in ("faq.txt", "guides/notes.md"))
    assert "2 added" in uploaded.stdout


def test_a_folder_without_recursive_is_refused_with_a_hint(seed_cli, kb, folder):
    done = seed_cli.run("docs", "upload", "--knowledge-base", kb["id"], str(folder), expect=2)
    assert f"{folder} is a folder: add -r (--recursive)" in done.stderr
    assert done.stdout == ""


def test_statuses_read_in_any_case_and_completed_is_processed(api, seed_cli, kb, uploaded):
    for path in ("faq.txt", "guides/notes.md"):
        wait_for_status(api, kb["id"], path, wanted=("PROCESSED",), timeout=180)
    processed = {d["path"] for d in list_documents(api, kb["id"], status="PROCESSED")}
    assert processed >= {"faq.txt", "guides/notes.md"}
    for spelling in ("completed", "Completed", "processed"):
        assert {d["path"] for d in list_documents(api, kb["id"], status=spelling)} == processed
    assert list_documents(api, kb["id"], status="failed") == []
    listed = seed_cli.json("docs", "list", "--knowledge-base", kb["id"], "--status", "completed")
    assert {d["path"] for d in listed["items"]} == processed
    refused = api.call("GET", f"/knowledge-bases/{kb['id']}/documents", params={"status": "done"})
    assert refused.status_code == 400 and "completed is PROCESSED" in refused.json()["error"]["message"]


def test_documents_carry_who_added_them(api, colleague, kb, uploaded, s3, local_env):
    mine = list_documents(api, kb["id"], prefix="guides/")
    assert [d["createdBy"] for d in mine] == [kb["ownerId"]]
    assert mine[0]["originalUrl"] is None
    # A colleague's new version leaves the document its first author's.
    doc = mine[0]
    theirs = data(colleague.call("POST", f"/knowledge-bases/{kb['id']}/documents",
                                 {"path": "guides/notes.md", "content": "IyBOb3RlcwoKTmV3IHRleHQuCg=="}), 202)
    assert theirs["result"] == "updated" and theirs["document"]["id"] == doc["id"]
    assert theirs["document"]["createdBy"] == kb["ownerId"]
    # A file dropped straight into the bucket has no user.
    s3.put_object(Bucket=local_env["KB_BUCKET"], Key=f"kb/{kb['id']}/dropped.md", Body=NOTES)
    dropped, _ = wait_for_status(api, kb["id"], "dropped.md", timeout=180)
    assert dropped["createdBy"] is None


@pytest.fixture(scope="module")
def site():
    pages = {
        "/docs/reset": (200, {"Content-Type": "text/html; charset=utf-8"}, PAGE),
        "/files/download?id=7": (200, {"Content-Type": "text/markdown",
                                       "Content-Disposition": 'attachment; filename="maintenance.md"'}, NOTES),
        "/old/reset": (301, {"Location": "/docs/reset"}, b""),
        "/loop": (302, {"Location": "/loop"}, b""),
        "/picture": (200, {"Content-Type": "image/png"}, b"\x89PNG\r\n\x1a\n" + bytes(64)),
        "/empty": (200, {"Content-Type": "text/plain"}, b""),
    }
    with LocalPageServer(pages) as server:
        yield server


def test_a_document_from_a_url_is_fetched_named_and_ingested(api, kb, site):
    added = data(api.call("POST", f"/knowledge-bases/{kb['id']}/documents", {"url": site.url("/old/reset")}), 202)
    document = added["document"]
    # Named by the page it ended at, with the extension its content type implies: read as HTML.
    assert (added["result"], document["path"], document["originalUrl"]) == ("added", "reset.html",
                                                                            site.url("/old/reset"))
    assert document["createdBy"] == kb["ownerId"]
    processed, _ = wait_for_status(api, kb["id"], "reset.html", timeout=180)
    assert processed["status"] == "PROCESSED" and processed["contentType"] == "text/html"
    hits = data(api.call("POST", f"/knowledge-bases/{kb['id']}/search",
                         {"query": "how do I reset the heat pump", "strategy": "keyword", "topK": 1}))
    assert "amber light" in hits["results"][0]["content"] and "Home" not in hits["results"][0]["content"]

    named = data(api.call("POST", f"/knowledge-bases/{kb['id']}/documents",
                          {"url": site.url("/files/download?id=7"), "path": "guides/maintenance.md",
                           "metadata": {"team": "service"}}), 202)
    assert (named["document"]["path"], named["document"]["originalUrl"]) == (
        "guides/maintenance.md", site.url("/files/download?id=7"))
    by_disposition = data(api.call("POST", f"/knowledge-bases/{kb['id']}/documents",
                                   {"url": site.url("/files/download?id=7")}), 202)
    assert by_disposition["document"]["path"] == "maintenance.md"
    # The same bytes at the same path again: unchanged, nothing ingested again.
    wait_for_status(api, kb["id"], "maintenance.md", wanted=("PROCESSED",), timeout=180)
    again = data(api.call("POST", f"/knowledge-bases/{kb['id']}/documents", {"url": site.url("/files/download?id=7")}))
    assert again["result"] == "unchanged"


@pytest.mark.parametrize("path, body, status, says", [
    ("/missing", None, 400, "the server answered 404"),
    ("/loop", None, 400, "more than 5 redirects"),
    ("/picture", None, 415, "PNG image"),
    ("/empty", None, 400, "no bytes"),
    (None, {"url": "ftp://example.com/a.txt"}, 400, "not an http or https URL"),
    (None, {"url": "https://example.com/a.txt", "content": "aGk="}, 400, "give no content, size or sha256"),
])
def test_a_url_that_cannot_be_a_document_is_a_4xx_naming_why(api, kb, site, path, body, status, says):
    answer = api.call("POST", f"/knowledge-bases/{kb['id']}/documents", body or {"url": site.url(path)})
    assert answer.status_code == status, answer.text
    assert answer.json()["error"]["message"].startswith("url") or status == 415
    assert says in answer.json()["error"]["message"]


def test_a_reader_cannot_make_the_service_fetch(local_env, org, kb, site):
    from tests.e2e.conftest import Api
    viewer = Api(local_env["KB_API_URL"], new_key(local_env, org, f"viewer-{secrets.token_hex(3)}", role="viewer"))
    asked = len(site.paths)
    answer = viewer.call("POST", f"/knowledge-bases/{kb['id']}/documents", {"url": site.url("/docs/reset")})
    assert answer.status_code == 403, answer.text
    time.sleep(0.2)
    assert len(site.paths) == asked, "the service fetched a URL for a caller who may not write"
    assert json.loads(answer.text)["success"] is False


def test_a_read_write_tool_lets_the_agent_add_what_it_learned(api, kb):
    """Seed 004's knowledge config `mode: read-write`: the agent also gets a tool that adds an
    entry to the knowledge base, in every format and over MCP (through the SDK's client);
    read-only (the default) gives none, and switching back takes it away at once."""
    import anyio

    from tests.e2e.test_mcp import http_session

    agent = data(api.call("POST", "/agents", {"name": f"Learner {secrets.token_hex(3)}"}), 201)
    tool = data(api.call("POST", f"/agents/{agent['id']}/knowledge-base-tools",
                         {"knowledgeBaseId": kb["id"], "toolName": "search_pump_notes",
                          "toolDescription": "Pump service notes", "mode": "read-write"}))["tool"]
    assert tool["config"]["mode"] == "read-write"
    listed = {t["name"]: t for t in data(api.call("GET", f"/agents/{agent['id']}/tools"))["items"]}
    writer = listed["add_to_pump_notes"]
    assert writer["type"] == "knowledge_base_write" and writer["id"] == tool["id"] + ".add"
    for fmt, names in (("openai", lambda d: [t["function"]["name"] for t in d]),
                       ("anthropic", lambda d: [t["name"] for t in d]),
                       ("mcp", lambda d: [t["name"] for t in d["tools"]])):
        assert names(data(api.call("GET", f"/agents/{agent['id']}/tools", params={"format": fmt}))) == [
            "search_pump_notes", "add_to_pump_notes"], fmt

    fact = "The pump's pressure switch is set to cut in at 1.4 bar and out at 2.8 bar on this model."

    async def over_mcp():
        async with http_session(api, agent["id"]) as session:
            tools = {t.name: t for t in (await session.list_tools()).tools}
            assert set(tools["add_to_pump_notes"].inputSchema["required"]) == {"title", "content"}
            return await session.call_tool("add_to_pump_notes", {"title": "Pressure switch", "content": fact})

    called = anyio.run(over_mcp)
    assert not called.isError, called
    entry = called.structuredContent["entry"]
    assert entry["created"] is True and entry["title"] == "Pressure switch"
    assert called.content[0].text.startswith("Added 'Pressure switch'")
    # A tool's answer is the result the model reads, not the envelope.
    found = api.call("POST", f"/agents/{agent['id']}/tools/{tool['id']}/invoke",
                     {"query": "pressure switch cut in bar"}).json()
    assert found["results"][0]["content"].startswith(fact[:40])
    again = api.call("POST", f"/agents/{agent['id']}/tools/{writer['id']}/invoke",
                     {"title": "Pressure switch", "content": fact}).json()
    assert again["entry"] == {**entry, "created": False}
    refused = api.call("POST", f"/agents/{agent['id']}/tools/{writer['id']}/invoke", {"content": fact})
    assert refused.status_code == 400 and "title" in refused.json()["error"]["message"]

    data(api.call("PATCH", f"/agents/{agent['id']}/knowledge-base-tools/{tool['id']}", {"mode": "read-only"}))
    names = [t["function"]["name"] for t in data(api.call("GET", f"/agents/{agent['id']}/tools",
                                                          params={"format": "openai"}))]
    assert names == ["search_pump_notes"]
    gone = api.call("POST", f"/agents/{agent['id']}/tools/{writer['id']}/invoke", {"title": "x", "content": "y"})
    assert gone.status_code == 404
    bad = api.call("PATCH", f"/agents/{agent['id']}/knowledge-base-tools/{tool['id']}", {"mode": "write"})
    assert bad.status_code == 400 and "mode" in bad.json()["error"]["message"]


# Chunks by document (the repository's GetChunksByDocument) with ChunkMetadata's offsets.
LONG_TEXT = "\n\n".join(
    f"Step {i}. Close the isolation valve {i} before the filter housing is opened, then drain the"
    f" housing into a bucket and check the O-ring {i} for cracks before it goes back." for i in range(12)) + "\n"


@pytest.fixture(scope="module")
def small_chunks(api):
    """A knowledge base cutting small chunks, so one document has many."""
    created = data(api.call("POST", "/knowledge-bases", {"name": f"Seed 004 chunks {secrets.token_hex(3)}",
                                                         "visibility": "org",
                                                         "chunking": {"chunkTokens": 50, "chunkOverlap": 0}}), 201)
    data(api.call("POST", f"/knowledge-bases/{created['id']}/documents", {
        "path": "service/filter.txt", "content": base64.b64encode(LONG_TEXT.encode()).decode()}), 202)
    document, _ = wait_for_status(api, created["id"], "service/filter.txt", wanted=("PROCESSED",), timeout=180)
    yield created, document
    api.call("DELETE", f"/knowledge-bases/{created['id']}")


def _every_chunk(api, kb_id, doc_id, limit):
    items, token, pages = [], None, 0
    while True:
        page = data(api.call("GET", f"/knowledge-bases/{kb_id}/documents/{doc_id}/chunks",
                             params={"limit": limit, **({"nextToken": token} if token else {})}))
        items, token, pages = items + page["items"], page["nextToken"], pages + 1
        if token is None:
            return items, pages


def test_a_documents_chunks_are_listed_in_order_a_page_at_a_time_with_their_offsets(api, small_chunks):
    kb, document = small_chunks
    assert document["chunks"] >= 6
    chunks, pages = _every_chunk(api, kb["id"], document["id"], 4)
    assert pages == -(-document["chunks"] // 4)
    assert [c["chunkIndex"] for c in chunks] == list(range(document["chunks"]))
    assert {c["documentId"] for c in chunks} == {document["id"]}
    for chunk in chunks:
        # ChunkMetadata's StartOffset and EndOffset: where the chunk lies in the document's text
        assert chunk["content"] == LONG_TEXT[chunk["startOffset"]:chunk["endOffset"]].strip()
    assert [c["startOffset"] for c in chunks] == sorted(c["startOffset"] for c in chunks)
    one = data(api.call("GET", f"/knowledge-bases/{kb['id']}/chunks/{chunks[2]['chunkId']}"))
    assert (one["startOffset"], one["endOffset"]) == (chunks[2]["startOffset"], chunks[2]["endOffset"])


def test_the_cli_lists_a_documents_chunks(seed_cli, small_chunks, api):
    kb, document = small_chunks
    listed = seed_cli.json("docs", "chunks", "service/filter.txt", "--knowledge-base", kb["id"], "--all")
    assert listed["items"] == _every_chunk(api, kb["id"], document["id"], 50)[0]
    table = seed_cli.run("docs", "chunks", document["id"], "--knowledge-base", kb["id"], "--limit", "2").stdout
    assert "--next-token" in table and f"{listed['items'][1]['startOffset']}–{listed['items'][1]['endOffset']}" in table


def test_a_documents_chunks_are_read_as_the_document_is(api, colleague, stranger, small_chunks):
    kb, document = small_chunks
    path = f"/knowledge-bases/{kb['id']}/documents/{document['id']}/chunks"
    assert colleague.call("GET", path).status_code == 200
    assert stranger.call("GET", path).status_code == 404
    mine = data(api.call("POST", f"/knowledge-bases/{kb['id']}/entries",
                         {"title": "Own note", "content": f"My own note {secrets.token_hex(4)}."}), 201)
    shared = data(api.call("POST", f"/knowledge-bases/{kb['id']}/entries",
                           {"title": "Team note", "content": f"A team note {secrets.token_hex(4)}.",
                            "level": "organisation"}), 201)
    entry_chunks = f"/knowledge-bases/{kb['id']}/documents/{{}}/chunks"
    assert [c["content"] for c in data(api.call("GET", entry_chunks.format(mine["id"])))["items"]] != []
    assert colleague.call("GET", entry_chunks.format(mine["id"])).status_code == 404  # another user's individual entry
    assert len(data(colleague.call("GET", entry_chunks.format(shared["id"])))["items"]) == 1
    for params, field in (({"limit": 0}, "limit"), ({"limit": 51}, "limit"), ({"nextToken": "nope"}, "nextToken"),
                          ({"after": 3}, "after")):
        refused = api.call("GET", path, params=params)
        assert refused.status_code == 400 and refused.json()["error"]["message"].startswith(field), refused.text
    other = data(api.call("GET", entry_chunks.format(mine["id"]), params={"limit": 1}))
    token = data(api.call("GET", path, params={"limit": 1}))["nextToken"]
    refused = api.call("GET", entry_chunks.format(mine["id"]), params={"nextToken": token})
    assert other["items"] and refused.status_code == 400 and "another document" in refused.text


# The agent's knowledge config: one mapping (`Knowledge *Config`), as the seed's agent has it.
def test_apply_takes_an_agents_knowledge_as_one_mapping(seed_cli, api, kb, tmp_path):
    name = f"seed-004-agent-{secrets.token_hex(3)}"
    manifest = tmp_path / "agent.yaml"
    manifest.write_text(f"""\
apiVersion: knowledge/v1
kind: Agent
metadata:
  id: {name}
spec:
  knowledge:
    knowledge_base: "{kb['name']}"
    mode: read-only
    query: {{max_results: 4, similarity_threshold: 0.4, retrieval_strategy: hybrid}}
""")
    applied = seed_cli.json("apply", "-f", str(manifest))
    assert [(c["kind"], c["action"]) for c in applied] == [("agent", "created"), ("tool", "created")]
    agent = next(a for a in data(api.call("GET", "/agents"))["items"] if a["name"] == name)
    try:
        (tool,) = [t for t in agent["availableTools"] if t["type"] == "knowledge_base"]
        assert (tool["config"]["knowledgeBaseId"], tool["config"]["defaultTopK"]) == (kb["id"], 4)
        assert {c["action"] for c in seed_cli.json("apply", "-f", str(manifest))} == {"unchanged"}
    finally:
        api.call("DELETE", f"/agents/{agent['id']}")
