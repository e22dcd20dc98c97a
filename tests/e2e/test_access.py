"""Who may do what inside an organisation, through the deployed API with several keys:
roles, ownership, the API-key lifecycle, the audit log, rate limits, CORS and the
envelope of every error (issue 13)."""
import json
import secrets
import time

import psycopg
import pytest
import requests
from psycopg.rows import dict_row

from tests.e2e.conftest import Api, new_key


@pytest.fixture(scope="module")
def org(local_env):
    """One organisation: its first user (admin), an editor, a second editor and a viewer."""
    name = f"e2e-roles-{secrets.token_hex(4)}"
    url = local_env["KB_API_URL"]
    return {
        "admin": Api(url, new_key(local_env, name, "ada")),  # first user: admin
        "editor": Api(url, new_key(local_env, name, "ed")),  # later users: editors
        "colleague": Api(url, new_key(local_env, name, "cole")),
        "viewer": Api(url, new_key(local_env, name, "vi", role="viewer")),
    }


def _data(response, status=200):
    assert response.status_code == status, response.text
    return response.json()["data"]


def _error(response, status, code):
    assert response.status_code == status, response.text
    body = response.json()
    assert body["success"] is False and body["error"]["code"] == code, body
    return body["error"]["message"]


def test_the_first_user_is_admin_and_make_key_sets_roles(org):
    roles = {who: _data(api.call("GET", "/api-keys"))["items"][0]["userName"] for who, api in org.items()}
    assert roles == {"admin": "ada", "editor": "ed", "colleague": "cole", "viewer": "vi"}
    # only the admin reads the organisation's audit log: that is where the roles show
    assert org["admin"].call("GET", "/audit-log").status_code == 200
    for who in ("editor", "viewer"):
        _error(org[who].call("GET", "/audit-log"), 403, "FORBIDDEN")


def test_a_viewer_searches_and_reads_but_writes_nothing(org):
    kb = _data(org["editor"].call("POST", "/knowledge-bases", {"name": "Shared", "visibility": "org"}), 201)
    viewer = org["viewer"]
    assert _data(viewer.call("GET", f"/knowledge-bases/{kb['id']}"))["id"] == kb["id"]
    assert _data(viewer.call("POST", f"/knowledge-bases/{kb['id']}/search", {"query": "anything"}))["results"] == []
    message = _error(viewer.call("POST", "/knowledge-bases", {"name": "Mine"}), 403, "FORBIDDEN")
    assert "viewer" in message
    _error(viewer.call("POST", f"/knowledge-bases/{kb['id']}/entries", {"title": "t", "content": "c"}), 403, "FORBIDDEN")
    _error(viewer.call("POST", f"/knowledge-bases/{kb['id']}/documents",
                       {"filename": "a.txt", "content": "aGVsbG8="}), 403, "FORBIDDEN")
    _error(viewer.call("POST", "/agents", {"name": "bot"}), 403, "FORBIDDEN")
    _error(viewer.call("DELETE", f"/knowledge-bases/{kb['id']}"), 403, "FORBIDDEN")
    assert _data(org["editor"].call("GET", f"/knowledge-bases/{kb['id']}/documents"))["items"] == []


def test_only_the_owner_or_an_admin_renames_shares_or_deletes_a_knowledge_base(org, stranger):
    editor, colleague, admin = org["editor"], org["colleague"], org["admin"]
    kb = _data(editor.call("POST", "/knowledge-bases", {"name": "Team notes", "visibility": "org"}), 201)
    path = f"/knowledge-bases/{kb['id']}"
    # a colleague writes into it (it is shared with the organisation) ...
    entry = _data(colleague.call("POST", f"{path}/entries", {"title": "Tip", "content": "Restart the pump."}), 201)
    assert entry["knowledgeBaseId"] == kb["id"]
    # ... but may not make it public, rename it or delete it: 403, not 404, since it sees it
    assert "owner" in _error(colleague.call("PATCH", path, {"visibility": "public"}), 403, "FORBIDDEN")
    _error(colleague.call("PATCH", path, {"name": "Mine now"}), 403, "FORBIDDEN")
    _error(colleague.call("DELETE", path), 403, "FORBIDDEN")
    assert _data(stranger.call("GET", "/knowledge-bases?limit=100"))["items"] == [] or \
        kb["id"] not in {k["id"] for k in _data(stranger.call("GET", "/knowledge-bases?limit=100"))["items"]}
    # the owner may; then another organisation sees it and still may not change it
    assert _data(editor.call("PATCH", path, {"visibility": "public"}))["visibility"] == "public"
    assert _data(stranger.call("GET", path))["id"] == kb["id"]
    _error(stranger.call("PATCH", path, {"name": "Eve's"}), 403, "FORBIDDEN")
    assert "another organisation" in _error(
        stranger.call("POST", f"{path}/entries", {"title": "x", "content": "y"}), 403, "FORBIDDEN")
    # an admin of its organisation may take it back and delete it
    assert _data(admin.call("PATCH", path, {"visibility": "org"}))["visibility"] == "org"
    _error(stranger.call("GET", path), 404, "NOT_FOUND")
    # a private one of a colleague is not even visible to an admin: 404
    private = _data(colleague.call("POST", "/knowledge-bases", {"name": "Cole's drafts"}), 201)
    _error(admin.call("PATCH", f"/knowledge-bases/{private['id']}", {"name": "x"}), 404, "NOT_FOUND")
    assert _data(admin.call("DELETE", path))["deleted"] is True


def test_agents_belong_to_their_owner_and_admins_manage_them_all(org):
    editor, colleague, admin = org["editor"], org["colleague"], org["admin"]
    agent = _data(editor.call("POST", "/agents", {"name": "Ed's bot"}), 201)
    path = f"/agents/{agent['id']}"
    for call in (("GET", path, None), ("PATCH", path, {"name": "mine"}), ("DELETE", path, None),
                 ("GET", f"{path}/tools", None), ("GET", f"{path}/audit-log", None)):
        _error(colleague.call(*call), 404, "NOT_FOUND")
    assert agent["id"] not in {a["id"] for a in _data(colleague.call("GET", "/agents"))["items"]}
    assert agent["id"] in {a["id"] for a in _data(admin.call("GET", "/agents"))["items"]}
    assert _data(admin.call("PATCH", path, {"name": "Renamed by admin"}))["name"] == "Renamed by admin"


def test_a_tool_whose_knowledge_base_the_caller_cannot_see_says_so_without_naming_it(org):
    editor, admin = org["editor"], org["admin"]
    secret = _data(editor.call("POST", "/knowledge-bases", {"name": "Merger plans"}), 201)  # private
    agent = _data(editor.call("POST", "/agents", {"name": "Ed's helper"}), 201)
    tool = _data(editor.call("POST", f"/agents/{agent['id']}/knowledge-base-tools",
                             {"knowledgeBaseId": secret["id"], "toolName": "search_notes",
                              "toolDescription": "Search my notes"}), 200)["tool"]
    mine = _data(editor.call("GET", f"/agents/{agent['id']}/tools"))["items"][0]
    assert mine["status"] == "ok" and mine["knowledgeBaseName"] == "Merger plans"
    seen = _data(admin.call("GET", f"/agents/{agent['id']}/tools"))["items"][0]
    assert seen["id"] == tool["id"] and seen["status"] == "knowledge_base_hidden"
    assert "Merger plans" not in str(seen)
    assert "Merger plans" not in admin.call("GET", f"/agents/{agent['id']}/audit-log").text
    assert "Merger plans" in editor.call("GET", f"/agents/{agent['id']}/audit-log").text
    # the admin may still edit the agent and keep the link it cannot see
    kept = admin.call("PATCH", f"/agents/{agent['id']}", {"availableTools": [
        {"id": tool["id"], "name": "search_notes", "type": "knowledge_base",
         "config": {"knowledgeBaseId": secret["id"]}}]})
    assert kept.status_code == 200, kept.text


def test_api_keys_are_listed_created_revoked_rotated_and_expire(org, local_env, db):
    editor, admin = org["editor"], org["admin"]
    made = _data(editor.call("POST", "/api-keys", {"name": "ci", "expiresInDays": 30}), 201)
    assert made["key"].startswith("kbk_") and made["prefix"] == made["key"][:10] and made["status"] == "active"
    assert made["expiresAt"] is not None
    listed = _data(editor.call("GET", "/api-keys"))["items"]
    assert {k["name"] for k in listed} >= {"ci"} and all("key" not in k for k in listed)
    ci = Api(local_env["KB_API_URL"], made["key"])
    assert ci.call("GET", "/knowledge-bases").status_code == 200
    used = next(k for k in _data(editor.call("GET", "/api-keys"))["items"] if k["id"] == made["id"])
    assert used["lastUsedAt"] is not None

    rotated = _data(ci.call("POST", f"/api-keys/{made['id']}/rotate"), 201)
    assert rotated["id"] != made["id"] and rotated["name"] == "ci" and rotated["expiresAt"] is not None
    _error(ci.call("GET", "/knowledge-bases"), 401, "UNAUTHORIZED")
    fresh = Api(local_env["KB_API_URL"], rotated["key"])
    assert fresh.call("GET", "/knowledge-bases").status_code == 200

    # colleagues cannot see or revoke each other's keys; an admin sees and revokes them all
    _error(org["colleague"].call("DELETE", f"/api-keys/{rotated['id']}"), 404, "NOT_FOUND")
    _error(editor.call("GET", "/api-keys?all=true"), 403, "FORBIDDEN")
    every = _data(admin.call("GET", "/api-keys?all=true"))["items"]
    assert {"ada", "ed", "cole", "vi"} <= {k["userName"] for k in every}
    # an admin never holds a working key of another user (issue 29): it revokes, it does not rotate
    assert "only its owner rotates it" in _error(admin.call("POST", f"/api-keys/{rotated['id']}/rotate"),
                                                 403, "FORBIDDEN")
    assert fresh.call("GET", "/knowledge-bases").status_code == 200
    assert _data(admin.call("DELETE", f"/api-keys/{rotated['id']}"))["status"] == "revoked"
    _error(fresh.call("GET", "/knowledge-bases"), 401, "UNAUTHORIZED")

    short = _data(editor.call("POST", "/api-keys", {"name": "short", "expiresInDays": 1}), 201)
    db.execute("UPDATE api_keys SET expires_at = now() - interval '1 second' WHERE id = %s", (short["id"],))
    _error(Api(local_env["KB_API_URL"], short["key"]).call("GET", "/agents"), 401, "UNAUTHORIZED")
    assert next(k for k in _data(editor.call("GET", "/api-keys"))["items"] if k["id"] == short["id"])["status"] == "expired"
    for body in ({"name": "x", "expiresInDays": 0}, {"name": ""}, {"name": "x", "scope": "all"}):
        _error(editor.call("POST", "/api-keys", body), 400, "INVALID_INPUT")


def test_every_write_is_in_the_organisations_audit_log_with_filters_and_pages(org):
    editor, admin = org["editor"], org["admin"]
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 1))
    kb = _data(editor.call("POST", "/knowledge-bases", {"name": "Audited", "visibility": "org"}), 201)
    _data(editor.call("PATCH", f"/knowledge-bases/{kb['id']}", {"name": "Audited 2"}))
    doc = _data(editor.call("POST", f"/knowledge-bases/{kb['id']}/documents",
                            {"filename": "n.txt", "content": "aGVsbG8gd29ybGQ="}), 202)["document"]
    _data(editor.call("POST", f"/knowledge-bases/{kb['id']}/entries", {"title": "t", "content": "c"}), 201)
    _data(editor.call("DELETE", f"/knowledge-bases/{kb['id']}/documents/{doc['id']}"))
    _data(editor.call("DELETE", f"/knowledge-bases/{kb['id']}"))

    items = _data(admin.call("GET", f"/audit-log?targetId={kb['id']}"))["items"]
    assert [i["action"] for i in items] == ["delete_knowledge_base", "update_knowledge_base", "create_knowledge_base"]
    assert items[1]["before"] == {"name": "Audited"} and items[1]["after"] == {"name": "Audited 2"}
    assert items[0]["keyId"] and items[0]["userId"]
    docs = _data(admin.call("GET", f"/audit-log?targetType=document&since={started}"))["items"]
    assert {"upload_document", "create_entry", "delete_document"} <= {i["action"] for i in docs}
    page = _data(admin.call("GET", f"/audit-log?since={started}&limit=2"))
    assert len(page["items"]) == 2 and page["nextToken"]
    rest = _data(admin.call("GET", f"/audit-log?since={started}&limit=200&nextToken={page['nextToken']}"))["items"]
    assert not {i["id"] for i in page["items"]} & {i["id"] for i in rest}
    assert all(i["id"] < page["items"][-1]["id"] for i in rest)
    _error(admin.call("GET", "/audit-log?since=yesterday"), 400, "INVALID_INPUT")
    _error(admin.call("GET", "/audit-log?targetType=planet"), 400, "INVALID_INPUT")


def test_a_key_over_its_rate_gets_429_with_retry_after(local_env):
    # A key of 3 requests/s (bursts of 6): this suite's requests come one at a time at
    # about 20/s, below the default rate, so the default would need a crowd to reach.
    limited = Api(local_env["KB_API_URL"], new_key(local_env, f"e2e-rate-{secrets.token_hex(4)}", "fast", rate=3))
    statuses, throttled = [], None
    with requests.Session() as session:
        for _ in range(40):
            r = session.get(limited.base_url + "/agents", headers={"Authorization": f"Bearer {limited.key}"})
            statuses.append(r.status_code)
            if r.status_code == 429:
                throttled = r
                break
    assert throttled is not None, f"no 429 in {len(statuses)} requests"
    assert statuses.count(200) >= 6  # the burst went through first
    assert throttled.json()["error"]["code"] == "THROTTLED" and "3 requests per second" in throttled.text
    assert int(throttled.headers["Retry-After"]) == 1
    time.sleep(1)
    assert limited.call("GET", "/agents").status_code == 200


def test_bad_keys_from_one_address_slow_down(local_env, api):
    # The source address is the one API Gateway saw (the emulator takes it from
    # X-Forwarded-For), so this test guesses from an address of its own.
    url, guesser = local_env["KB_API_URL"] + "/knowledge-bases", {"X-Forwarded-For": f"198.51.100.{secrets.randbelow(250)}"}
    codes = [requests.get(url, headers={**guesser, "Authorization": f"Bearer kbk_{secrets.token_hex(8)}"}).status_code
             for _ in range(25)]
    assert codes[:20] == [401] * 20 and codes[-1] == 429, codes
    refused = requests.get(url, headers={**guesser, "Authorization": f"Bearer kbk_{secrets.token_hex(8)}"})
    assert refused.json()["error"]["code"] == "THROTTLED" and 1 <= int(refused.headers["Retry-After"]) <= 60
    # until the minute ends that address is refused even with a valid key; others are not
    assert api.call("GET", "/knowledge-bases", headers=guesser).status_code == 429
    assert api.call("GET", "/knowledge-bases").status_code == 200


def test_cors_answers_preflights_and_marks_every_response_for_configured_origins(api):
    allowed, other = "http://localhost:3000", "https://evil.example"
    pre = requests.options(api.base_url + "/knowledge-bases",
                           headers={"Origin": allowed, "Access-Control-Request-Method": "POST",
                                    "Access-Control-Request-Headers": "authorization,content-type"})
    assert pre.status_code == 204, pre.text
    assert pre.headers["Access-Control-Allow-Origin"] == allowed
    assert set(pre.headers["Access-Control-Allow-Methods"].split(",")) == {"GET", "POST", "OPTIONS"}
    assert "Authorization" in pre.headers["Access-Control-Allow-Headers"]
    for_other = requests.options(api.base_url + "/knowledge-bases",
                                 headers={"Origin": other, "Access-Control-Request-Method": "POST"})
    assert for_other.status_code == 403 and "Access-Control-Allow-Origin" not in for_other.headers
    ok = api.call("GET", "/knowledge-bases", headers={"Origin": allowed})
    assert ok.headers["Access-Control-Allow-Origin"] == allowed and "Origin" in ok.headers["Vary"]
    failed = api.call("GET", "/knowledge-bases/kb_nope", headers={"Origin": allowed})
    assert failed.status_code == 404 and failed.headers["Access-Control-Allow-Origin"] == allowed
    assert "Access-Control-Allow-Origin" not in api.call("GET", "/knowledge-bases", headers={"Origin": other}).headers


def test_every_error_is_in_the_envelope(api):
    cases = [("GET", "/no-such-thing", {}, 404, "NOT_FOUND"), ("GET", "/", {}, 404, "NOT_FOUND"),
             ("DELETE", "/health", {}, 405, "METHOD_NOT_ALLOWED"),
             ("PUT", "/knowledge-bases/kb_1", {}, 405, "METHOD_NOT_ALLOWED"),
             ("POST", "/knowledge-bases", {"data": "x", "headers": {"Content-Type": "text/plain"}}, 415,
              "UNSUPPORTED_TYPE")]
    for method, path, extra, status, code in cases:
        headers = {"Authorization": f"Bearer {api.key}", **extra.pop("headers", {})}
        r = requests.request(method, api.base_url + path, headers=headers, **extra)
        assert r.status_code == status, (method, path, r.status_code, r.text)
        assert r.json() == {"success": False, "error": {"code": code, "message": r.json()["error"]["message"]}}
    assert requests.delete(api.base_url + "/health").headers["Allow"] == "GET"


def test_an_owner_made_a_viewer_changes_nothing_it_owns(local_env, org):
    """Issue 29: ownership never outranks the role. After `make key ... ROLE=viewer` the
    former owner reads its knowledge base and may not rename, publish or delete it."""
    name = f"e2e-demoted-{secrets.token_hex(4)}"
    new_key(local_env, name, "root")  # the organisation's first user, its admin
    owner = Api(local_env["KB_API_URL"], new_key(local_env, name, "olga"))
    kb = _data(owner.call("POST", "/knowledge-bases", {"name": "Olga's", "visibility": "private"}), 201)
    demoted = Api(local_env["KB_API_URL"], new_key(local_env, name, "olga", role="viewer"))
    path = f"/knowledge-bases/{kb['id']}"
    assert _data(demoted.call("GET", path))["id"] == kb["id"]
    for method, body in (("PATCH", {"name": "Renamed"}), ("PATCH", {"visibility": "public"}), ("DELETE", None)):
        assert "viewer" in _error(demoted.call(method, path, body), 403, "FORBIDDEN")
    assert _data(demoted.call("GET", path))["name"] == "Olga's"


def test_a_private_knowledge_base_is_nameless_to_everyone_but_its_owner(local_env):
    """Issue 29: an admin managing a colleague's agent, or reading the audit log, learns that
    a tool links a knowledge base and its id, never its name, its files or the titles of the
    colleague's individual entries; an edit by the admin leaves the hidden link as it was."""
    name = f"e2e-redact-{secrets.token_hex(4)}"
    url = local_env["KB_API_URL"]
    admin = Api(url, new_key(local_env, name, "root"))
    owner = Api(url, new_key(local_env, name, "olga"))
    kb = _data(owner.call("POST", "/knowledge-bases", {"name": "Zanzibar plans", "description": "Quiet merger",
                                                        "visibility": "private"}), 201)
    _data(owner.call("POST", f"/knowledge-bases/{kb['id']}/documents",
                     {"filename": "zanzibar-terms.txt", "content": "dGVybXM="}), 202)
    _data(owner.call("POST", f"/knowledge-bases/{kb['id']}/entries",
                     {"title": "Zanzibar diary", "content": "A note for myself."}), 201)
    agent = _data(owner.call("POST", "/agents", {"name": "Deal helper"}), 201)
    tool = _data(owner.call("POST", f"/agents/{agent['id']}/knowledge-base-tools",
                            {"quickAdd": True, "knowledgeBaseId": kb["id"]}), 200)["tool"]
    assert "zanzibar" in tool["name"].lower() and "Zanzibar plans" in tool["description"]
    secrets_shown = ("zanzibar", "quiet merger")

    seen_by_admin = [admin.call("GET", f"/agents/{agent['id']}"), admin.call("GET", "/agents"),
                     admin.call("GET", f"/agents/{agent['id']}/tools"),
                     admin.call("GET", f"/agents/{agent['id']}/tools?format=openai"),
                     admin.call("GET", f"/agents/{agent['id']}/audit-log"),
                     admin.call("GET", "/audit-log", params={"limit": 200})]
    for answer in seen_by_admin:
        assert answer.status_code == 200, answer.text
        assert not any(word in answer.text.lower() for word in secrets_shown), answer.text[:2000]
    linked = _data(admin.call("GET", f"/agents/{agent['id']}"))["availableTools"][0]
    assert linked["config"]["knowledgeBaseId"] == kb["id"] and linked["redacted"] is True
    log = _data(admin.call("GET", "/audit-log", params={"limit": 200}))["items"]
    mine = [e for e in log if kb["id"] in json.dumps(e)]  # about it, its files, entries or a tool linking it
    assert {e["action"] for e in mine} == {"create_knowledge_base", "upload_document", "create_entry",
                                           "link_knowledge_base"}
    assert all(e["redacted"] for e in mine)

    # the admin's edit of the agent as it sees it keeps the hidden link as it is stored
    shown = _data(admin.call("GET", f"/agents/{agent['id']}"))
    _data(admin.call("PATCH", f"/agents/{agent['id']}", {"description": "edited",
                                                         "availableTools": shown["availableTools"]}))
    kept = _data(owner.call("GET", f"/agents/{agent['id']}"))["availableTools"][0]
    assert (kept["name"], kept["description"]) == (tool["name"], tool["description"])
    # the owner sees all of it, in its agent and in its agent's log
    assert "Zanzibar plans" in owner.call("GET", f"/agents/{agent['id']}/audit-log").text
    # deleted, it stays nameless to the admin (its deletion recorded it private, someone else's)
    _data(owner.call("DELETE", f"/knowledge-bases/{kb['id']}"))
    for path in ("/audit-log?limit=200", f"/agents/{agent['id']}", f"/agents/{agent['id']}/tools"):
        answer = admin.call("GET", path)
        assert answer.status_code == 200 and "zanzibar" not in answer.text.lower(), answer.text[:2000]
    assert "delete_knowledge_base" in admin.call("GET", "/audit-log?limit=200").text
    # and whole to its owner, who sees its tool as missing, by name
    tools = _data(owner.call("GET", f"/agents/{agent['id']}/tools"))["items"]
    assert (tools[0]["status"], tools[0]["knowledgeBaseName"]) == ("knowledge_base_missing", "Zanzibar plans")


def test_access_lists_narrow_who_in_the_organisation_reads_and_writes(local_env, db):
    """Issue 28, seed 004's `access: {read_roles, write_roles}`: on an org knowledge base,
    the API and the row-level security let only the listed roles, groups and users read it,
    and only the write lists' write into it; the owner and admins always, viewers never write."""
    from chalicelib.storage.db import functions_login

    name, url = f"e2e-access-{secrets.token_hex(4)}", local_env["KB_API_URL"]
    admin = Api(url, new_key(local_env, name, "ada"))
    rita = Api(url, new_key(local_env, name, "rita", groups="researcher"))
    eng = Api(url, new_key(local_env, name, "eng", groups="engineer,oncall"))
    ed = Api(url, new_key(local_env, name, "ed"))
    vi = Api(url, new_key(local_env, name, "vi", role="viewer", groups="researcher"))
    access = {"readRoles": ["researcher", "engineer"], "writeRoles": ["researcher"]}
    kb = _data(admin.call("POST", "/knowledge-bases", {"name": "Research", "visibility": "org", "access": access}), 201)
    assert kb["access"] == {"readRoles": ["engineer", "researcher"], "readUsers": None,
                            "writeRoles": ["researcher"], "writeUsers": None}
    path = f"/knowledge-bases/{kb['id']}"
    entry = _data(rita.call("POST", f"{path}/entries", {"title": "Assay", "content": "The assay uses ELISA plates.", "level": "organisation"}), 201)
    assert _data(eng.call("GET", path))["stats"]["documentCount"] == 1
    assert [r["content"] for r in _data(eng.call("POST", f"{path}/search", {"query": "ELISA assay"}))["results"]]
    assert "writeRoles" in _error(eng.call("POST", f"{path}/entries", {"title": "t", "content": "c"}), 403, "FORBIDDEN")
    _error(vi.call("POST", f"{path}/entries", {"title": "t", "content": "c"}), 403, "FORBIDDEN")  # read yes, write never
    assert _data(vi.call("GET", path))["id"] == kb["id"]
    _error(ed.call("GET", path), 404, "NOT_FOUND")  # an editor in no list: as if it were not there
    _error(ed.call("POST", f"{path}/search", {"query": "ELISA"}), 404, "NOT_FOUND")
    assert kb["id"] not in {k["id"] for k in _data(ed.call("GET", "/knowledge-bases?limit=100"))["items"]}

    # The database says the same to the functions' role, whatever SQL forgets (migration 0018).
    ids = {r["name"]: r["id"] for r in db.execute(
        "SELECT u.name, u.id FROM users u JOIN organizations o ON o.id = u.org_id WHERE o.name = %s", (name,))}
    org_id = _data(admin.call("GET", path))["organizationId"]
    with psycopg.connect(functions_login(local_env["DATABASE_URL"]), autocommit=True, row_factory=dict_row) as conn:
        def as_user(user):
            conn.execute("SELECT set_config('kb.org_id', %s, false), set_config('kb.user_id', %s, false)",
                         (org_id, ids[user]))
        for user, reads in (("ed", 0), ("eng", 1), ("rita", 1), ("ada", 1)):
            as_user(user)
            seen = [conn.execute(f"SELECT count(*) AS n FROM {table} WHERE kb_id = %s", (kb["id"],)).fetchone()["n"]
                    for table in ("documents", "chunks", "chunks_visible")]
            assert [min(n, 1) for n in seen] == [reads] * 3, (user, seen)
        as_user("eng")  # reads it, may not write it: its delete finds nothing to delete
        assert conn.execute("DELETE FROM documents WHERE kb_id = %s", (kb["id"],)).rowcount == 0
    assert _data(rita.call("GET", f"{path}/documents/{entry['id']}"))["id"] == entry["id"]

    # Users by name; the lists are replaced whole, and null lifts them.
    _data(admin.call("PATCH", path, {"access": {**access, "writeUsers": ["eng"]}}))
    _data(eng.call("POST", f"{path}/entries", {"title": "Plates", "content": "Plates are read at 450 nm.", "level": "organisation"}), 201)
    _error(rita.call("PATCH", path, {"access": None}), 403, "FORBIDDEN")  # not its owner
    assert _data(admin.call("PATCH", path, {"access": None}))["access"]["readRoles"] is None
    assert _data(ed.call("GET", path))["stats"]["documentCount"] == 2

    # Lists that cannot mean anything are refused, naming the field.
    for body, field in (({"visibility": "public", "access": {"readRoles": ["engineer"]}}, "access.readRoles"),
                        ({"visibility": "private", "access": {"writeUsers": ["eng"]}}, "access.writeRoles"),
                        ({"visibility": "org", "access": {"read_roles": ["engineer"]}}, "access.read_roles"),
                        ({"visibility": "org", "access": {"readRoles": ["no spaces"]}}, "access.readRoles"),
                        ({"visibility": "org", "access": ["engineer"]}, "access")):
        assert field in _error(admin.call("POST", "/knowledge-bases", {"name": "x", **body}), 400, "INVALID_INPUT")
    _data(admin.call("PATCH", path, {"access": {"readUsers": ["ed"]}}))
    assert "access.readRoles" in _error(admin.call("PATCH", path, {"visibility": "public"}), 400, "INVALID_INPUT")
