"""Entry levels on every read path (issue 29): an individual entry reaches its writer
alone, an organisation one its knowledge base's organisation, a public one whoever sees
the knowledge base, whatever path reads it. The matrix: the writer (an admin, who may
write every level), a colleague admin, editor and viewer, and another organisation's
viewer × private, organisation and public knowledge bases × the three levels × search
(one and many knowledge bases, hybrid and keyword), /query, the search Lambda,
knowledge-search, document lists, gets and knowledge-base counts, and de-duplication."""
import secrets

import pytest

from tests.e2e.conftest import Api, invoke, new_key

LEVELS = ("individual", "organisation", "public")
VISIBILITIES = ("private", "org", "public")
READERS = ("writer", "admin", "editor", "viewer", "stranger")
QUESTION = "What is the reset code of the cooling pump?"


@pytest.fixture(scope="module")
def world(local_env):
    org, other = f"e2e-levels-{secrets.token_hex(4)}", f"e2e-levels-other-{secrets.token_hex(4)}"
    url = local_env["KB_API_URL"]
    keys = {"writer": new_key(local_env, org, "wanda"),  # first user: admin
            "admin": new_key(local_env, org, "ada", role="admin"),
            "editor": new_key(local_env, org, "ed"),
            "viewer": new_key(local_env, org, "vi", role="viewer"),
            "stranger": new_key(local_env, other, "eve", role="viewer")}
    apis = {who: Api(url, key) for who, key in keys.items()}
    kbs, entries = {}, {}
    for visibility in VISIBILITIES:
        kb = apis["writer"].call("POST", "/knowledge-bases", {"name": f"Levels {visibility}",
                                                               "visibility": visibility}).json()["data"]
        kbs[visibility] = kb["id"]
        for level in LEVELS:
            marker = f"zq{secrets.token_hex(3)}"
            answer = apis["writer"].call("POST", f"/knowledge-bases/{kb['id']}/entries", {
                "title": f"Cooling pump {marker}", "level": level,
                "content": f"The reset code of the cooling pump at site {marker} is 4417."})
            assert answer.status_code == 201, answer.text
            assert answer.json()["data"]["level"] == level
            entries[(visibility, level)] = {"id": answer.json()["data"]["id"], "marker": marker}
    return {"apis": apis, "keys": keys, "kbs": kbs, "entries": entries}


def _sees_kb(reader: str, visibility: str) -> bool:
    return reader == "writer" or (visibility == "org" and reader != "stranger") or visibility == "public"


def expected(reader: str, visibility: str) -> set[str]:
    """The levels of the knowledge base's entries this reader may read."""
    if not _sees_kb(reader, visibility):
        return set()
    return {level for level in LEVELS
            if reader == "writer" or level == "public" or (level == "organisation" and reader != "stranger")}


def _levels(world, visibility: str, texts: list[str]) -> set[str]:
    return {level for level in LEVELS
            if any(world["entries"][(visibility, level)]["marker"] in text for text in texts)}


def _found(response) -> list[str] | None:
    """The texts of an answer, None for a 404 (the knowledge base is not the reader's to see)."""
    if response.status_code == 404:
        return None
    assert response.status_code == 200, response.text
    body = response.json()
    data = body["data"] if isinstance(body, dict) and "data" in body else body
    if isinstance(data, list):  # /query's bare list
        return [r["text"] for r in data]
    if "results" in data:
        return [r["content"] for r in data["results"]]
    return [d["filename"] + " " + (d.get("title") or "") for d in data["items"]]


READ_PATHS = {
    "search hybrid": lambda api, kb: api.call("POST", f"/knowledge-bases/{kb}/search",
                                              {"query": QUESTION, "topK": 20}),
    "search keyword": lambda api, kb: api.call("POST", f"/knowledge-bases/{kb}/search",
                                               {"query": "cooling pump reset code", "topK": 20,
                                                "strategy": "keyword"}),
    "search many": lambda api, kb: api.call("POST", "/search", {"knowledgeBaseIds": [kb], "query": QUESTION,
                                                                "topK": 20}),
    "query": lambda api, kb: api.call("GET", f"/knowledge-bases/{kb}/query", params={"q": QUESTION, "top_k": 20}),
    "documents": lambda api, kb: api.call("GET", f"/knowledge-bases/{kb}/documents"),
}


@pytest.mark.parametrize("path", READ_PATHS)
@pytest.mark.parametrize("reader", READERS)
def test_every_read_path_answers_the_levels_the_reader_may_read(world, reader, path):
    seen = {}
    for visibility, kb in world["kbs"].items():
        texts = _found(READ_PATHS[path](world["apis"][reader], kb))
        seen[visibility] = set() if texts is None else _levels(world, visibility, texts)
    assert seen == {v: expected(reader, v) for v in VISIBILITIES}


@pytest.mark.parametrize("reader", READERS)
def test_the_search_lambda_answers_the_levels_the_reader_may_read(world, lambda_client, reader):
    seen = {}
    for visibility, kb in world["kbs"].items():
        answer = invoke(lambda_client, {"apiKey": world["keys"][reader], "knowledgeBaseId": kb,
                                        "query": QUESTION, "topK": 20})
        texts = [r["content"] for r in answer["data"]["results"]] if answer["success"] else []
        assert answer["success"] or answer["error"]["status"] == 404, answer
        seen[visibility] = _levels(world, visibility, texts)
    assert seen == {v: expected(reader, v) for v in VISIBILITIES}


@pytest.mark.parametrize("reader", READERS)
def test_gets_and_counts_answer_the_levels_the_reader_may_read(world, reader):
    api = world["apis"][reader]
    for visibility, kb in world["kbs"].items():
        readable = expected(reader, visibility)
        for level in LEVELS:
            entry = world["entries"][(visibility, level)]
            status = api.call("GET", f"/knowledge-bases/{kb}/documents/{entry['id']}").status_code
            assert status == (200 if level in readable else 404), (visibility, level)
        answer = api.call("GET", f"/knowledge-bases/{kb}")
        if _sees_kb(reader, visibility):
            assert answer.json()["data"]["stats"]["documentCount"] == len(readable), visibility
        else:
            assert answer.status_code == 404


@pytest.mark.parametrize("reader", READERS)
def test_knowledge_search_answers_the_levels_the_reader_may_read(world, reader):
    answer = world["apis"][reader].call("GET", "/knowledge-search", params={"q": QUESTION, "max_results": 20})
    assert answer.status_code == 200, answer.text
    texts = [hit["content"] for hit in answer.json()["data"]]
    assert {v: _levels(world, v, texts) for v in VISIBILITIES} == {v: expected(reader, v) for v in VISIBILITIES}


def test_posting_text_another_user_holds_alone_makes_an_entry_of_ones_own(world):
    """De-duplication within what the caller may read: the colleague's post of the
    writer's individual text is a new entry (201), never the writer's id, title or level."""
    kb = world["kbs"]["org"]
    mine = world["entries"][("org", "individual")]
    body = {"title": "My own note", "content": f"The reset code of the cooling pump at site {mine['marker']} is 4417."}
    answer = world["apis"]["editor"].call("POST", f"/knowledge-bases/{kb}/entries", body)
    assert answer.status_code == 201, answer.text
    own = answer.json()["data"]
    assert own["id"] != mine["id"] and own["title"] == "My own note" and own["level"] == "individual"
    # posted again by the same colleague: de-duplicated to the colleague's own entry
    again = world["apis"]["editor"].call("POST", f"/knowledge-bases/{kb}/entries", body)
    assert again.status_code == 200 and again.json()["data"]["id"] == own["id"]
    # an organisation entry of the same text is one the colleague may read: answered as it is
    shared = world["entries"][("org", "organisation")]
    answer = world["apis"]["editor"].call("POST", f"/knowledge-bases/{kb}/entries", {
        "title": "Same", "content": f"The reset code of the cooling pump at site {shared['marker']} is 4417."})
    assert answer.status_code == 200 and answer.json()["data"]["id"] == shared["id"]
    world["apis"]["editor"].call("DELETE", f"/knowledge-bases/{kb}/documents/{own['id']}")


def test_an_editor_writes_up_to_its_organisation_and_a_viewer_writes_nothing(world):
    kb = world["kbs"]["org"]
    body = {"title": "t", "content": f"level probe {secrets.token_hex(4)}"}
    answer = world["apis"]["editor"].call("POST", f"/knowledge-bases/{kb}/entries", {**body, "level": "public"})
    assert answer.status_code == 403 and "up to the level organisation" in answer.json()["error"]["message"]
    answer = world["apis"]["editor"].call("POST", f"/knowledge-bases/{kb}/entries", {**body, "level": "team"})
    assert answer.status_code == 400 and "level" in answer.json()["error"]["message"]
    assert world["apis"]["viewer"].call("POST", f"/knowledge-bases/{kb}/entries", body).status_code == 403


@pytest.mark.parametrize("reader", ["writer", "admin", "editor"])
def test_agent_tools_and_context_answer_the_levels_the_reader_may_read(world, reader):
    """The paths an agent runtime takes (a knowledge-base tool's invocation, which MCP and the
    search Lambda's agentId call run, knowledge_search and context assembly), for each
    reader who may make an agent, on the organisation knowledge base."""
    api, kb = world["apis"][reader], world["kbs"]["org"]
    agent = api.call("POST", "/agents", {"name": f"Levels {reader}"}).json()["data"]
    tool = api.call("POST", f"/agents/{agent['id']}/knowledge-base-tools",
                    {"quickAdd": True, "knowledgeBaseId": kb, "defaultTopK": 10}).json()["data"]["tool"]
    knowledge = api.call("POST", f"/agents/{agent['id']}/tools", {"type": "knowledge_search", "defaultMaxResults": 20})
    assert knowledge.status_code == 201, knowledge.text
    expected_levels = expected(reader, "org")
    invoked = api.call("POST", f"/agents/{agent['id']}/tools/{tool['id']}/invoke", {"query": QUESTION, "topK": 10})
    assert invoked.status_code == 200, invoked.text
    assert _levels(world, "org", [r["content"] for r in invoked.json()["results"]]) == expected_levels
    found = api.call("POST", f"/agents/{agent['id']}/tools/{knowledge.json()['data']['id']}/invoke",
                     {"query": QUESTION, "maxResults": 20})
    assert _levels(world, "org", [r["content"] for r in found.json()["results"]]) == expected_levels
    context = api.call("POST", f"/agents/{agent['id']}/context", {"message": QUESTION, "maxTokens": 4000})
    assert context.status_code == 200, context.text
    assert _levels(world, "org", [context.json()["data"]["context"]]) == expected_levels


def test_a_writer_widens_its_own_entry_and_an_admin_promotes_or_demotes_what_it_reads(world):
    """Issue 31 item 3: PATCH .../entries/{id} {"level"}; the readers follow the level at once."""
    apis, kb = world["apis"], world["kbs"]["org"]
    marker = f"zp{secrets.token_hex(3)}"
    text = {"title": f"Valve {marker}", "content": f"The valve at site {marker} opens at 3 bar."}
    entry = apis["editor"].call("POST", f"/knowledge-bases/{kb}/entries", text).json()["data"]
    one = f"/knowledge-bases/{kb}/entries/{entry['id']}"
    doc = f"/knowledge-bases/{kb}/documents/{entry['id']}"

    def readers() -> set[str]:
        return {who for who in ("writer", "admin", "editor", "viewer") if apis[who].call("GET", doc).status_code == 200}

    assert readers() == {"editor"}
    assert apis["admin"].call("PATCH", one, {"level": "public"}).status_code == 404  # another's individual entry
    assert apis["viewer"].call("PATCH", one, {"level": "organisation"}).status_code == 403
    assert apis["editor"].call("PATCH", one, {"level": "public"}).status_code == 403  # beyond an editor's reach
    widened = apis["editor"].call("PATCH", one, {"level": "organisation"})
    assert widened.status_code == 200 and widened.json()["data"]["level"] == "organisation", widened.text
    assert readers() == {"writer", "admin", "editor", "viewer"}
    found = apis["viewer"].call("POST", f"/knowledge-bases/{kb}/search", {"query": f"valve {marker}",
                                                                          "strategy": "keyword"}).json()["data"]
    assert [r["documentId"] for r in found["results"]] == [entry["id"]]  # its chunks followed
    assert apis["editor"].call("PATCH", f"/knowledge-bases/{kb}/entries/{entry['id']}",
                               {"level": "individual", "title": "x"}).status_code == 400
    assert apis["admin"].call("PATCH", one, {"level": "everyone"}).status_code == 400
    demoted = apis["admin"].call("PATCH", one, {"level": "individual"})
    assert demoted.status_code == 200 and readers() == {"editor"}, demoted.text
    # The same text at organisation level already: widening it again would make two.
    assert apis["writer"].call("POST", f"/knowledge-bases/{kb}/entries",
                               {**text, "level": "organisation"}).status_code == 201
    clash = apis["editor"].call("PATCH", one, {"level": "organisation"})
    assert clash.status_code == 409 and clash.json()["error"]["code"] == "ENTRY_EXISTS", clash.text
