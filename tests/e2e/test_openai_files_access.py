"""OpenAI's /v1 files belong to their uploader, as a private knowledge base belongs to its
owner: every /v1/files route for a viewer, a second editor and an admin of the same
organisation, and another organisation's editor; a file reaches others only as a document
of a knowledge base they may read. Files stored before their uploader was recorded stay
their uploader's. And the content route never serves the uploader's type."""
import secrets

import pytest

from tests.e2e.conftest import Api, new_key, wait_for_status

pytestmark = pytest.mark.e2e

NOTES = b"# Ed's notes\n\nThe quarterly budget freeze starts on the ninth of March for the whole hangar team.\n"


@pytest.fixture(scope="module")
def org(local_env):
    name = f"e2e-files-{secrets.token_hex(4)}"
    url = local_env["KB_API_URL"]
    return {
        "name": name,
        "admin": Api(url, new_key(local_env, name, "ada")),  # first user: admin
        "editor": Api(url, new_key(local_env, name, "ed")),
        "colleague": Api(url, new_key(local_env, name, "cole")),
        "viewer": Api(url, new_key(local_env, name, "vi", role="viewer")),
        "stranger": Api(url, new_key(local_env, f"e2e-files-other-{secrets.token_hex(4)}", "eve")),
    }


def upload(api: Api, name: str, content: bytes, content_type: str = "text/markdown"):
    return api.call("POST", "/v1/files", files={"file": (name, content, content_type)},
                    data={"purpose": "assistants"})


def _ok(response, status=200) -> dict:
    assert response.status_code == status, response.text
    return response.json()


def _listed(api: Api) -> set[str]:
    return {f["id"] for f in _ok(api.call("GET", "/v1/files", params={"limit": 100}))["data"]}


def _not_found(response):
    assert response.status_code == 404, response.text
    assert response.json()["error"]["type"] == "invalid_request_error"


def test_a_file_is_listed_read_attached_and_deleted_by_its_uploader_alone(org):
    editor = org["editor"]
    file_id = _ok(upload(editor, "ed-notes.md", NOTES))["id"]
    private = _ok(editor.call("POST", "/v1/vector_stores", {"name": "Ed's own", "file_ids": [file_id]}))
    assert file_id in _listed(editor)
    assert _ok(editor.call("GET", f"/v1/files/{file_id}"))["filename"] == "ed-notes.md"
    assert editor.call("GET", f"/v1/files/{file_id}/content").text == NOTES.decode()

    mine = {who: _ok(upload(org[who], f"{who}.txt", f"{who}'s own words".encode()))["id"]
            for who in ("colleague", "admin", "stranger")}
    assert upload(org["viewer"], "vi.txt", b"a viewer uploads nothing").status_code == 403
    for who in ("viewer", "colleague", "admin", "stranger"):
        other = org[who]
        assert file_id not in _listed(other), who
        _not_found(other.call("GET", f"/v1/files/{file_id}"))
        _not_found(other.call("GET", f"/v1/files/{file_id}/content"))
        _not_found(other.call("GET", f"/v1/vector_stores/{private['id']}/files/{file_id}"))
        _not_found(other.call("DELETE", f"/v1/files/{file_id}"))
        if who == "viewer":  # creates no store: the file is not found first
            _not_found(other.call("POST", "/v1/vector_stores", {"file_ids": [file_id]}))
            continue
        stores_before = {s["id"] for s in _ok(other.call("GET", "/v1/vector_stores", params={"limit": 100}))["data"]}
        _not_found(other.call("POST", "/v1/vector_stores", {"name": "stolen", "file_ids": [file_id]}))
        stores_after = {s["id"] for s in _ok(other.call("GET", "/v1/vector_stores", params={"limit": 100}))["data"]}
        assert stores_after == stores_before, who  # refused before anything was created
        own = _ok(other.call("POST", "/v1/vector_stores", {"name": f"{who}'s store"}))
        _not_found(other.call("POST", f"/v1/vector_stores/{own['id']}/files", {"file_id": file_id}))
        assert _ok(other.call("GET", f"/v1/vector_stores/{own['id']}/files"))["data"] == []
        # each one's own file is its own to read and list, and the editor's to nobody else
        assert mine[who] in _listed(other) and mine[who] not in _listed(editor)
        assert other.call("GET", f"/v1/files/{mine[who]}/content").text == f"{who}'s own words"
        _not_found(editor.call("GET", f"/v1/files/{mine[who]}"))

    # after all of that the file is whole, and still the editor's
    assert editor.call("GET", f"/v1/files/{file_id}/content").text == NOTES.decode()
    assert _ok(editor.call("DELETE", f"/v1/files/{file_id}"))["deleted"] is True
    _not_found(editor.call("GET", f"/v1/files/{file_id}"))
    assert file_id not in _listed(editor)


def test_others_read_a_file_only_through_a_store_they_may_read(org):
    editor, viewer, colleague = org["editor"], org["viewer"], org["colleague"]
    file_id = _ok(upload(editor, "shared-notes.md", NOTES))["id"]
    shared = _ok(editor.call("POST", "/knowledge-bases", {"name": "Hangar", "visibility": "org"}), 201)["data"]
    _ok(editor.call("POST", f"/v1/vector_stores/{shared['id']}/files", {"file_id": file_id}))
    wait_for_status(editor, shared["id"], f"{file_id}/shared-notes.md", wanted=("PROCESSED",))

    for who in ("viewer", "colleague", "admin"):
        reader = org[who]
        assert _ok(reader.call("GET", f"/v1/vector_stores/{shared['id']}/files/{file_id}"))["status"] == "completed"
        found = _ok(reader.call("POST", f"/v1/vector_stores/{shared['id']}/search", {"query": "budget freeze"}))
        assert found["data"] and found["data"][0]["file_id"] == file_id, who
        assert "ninth of March" in found["data"][0]["content"][0]["text"]
        # ... and never as a file of theirs
        _not_found(reader.call("GET", f"/v1/files/{file_id}/content"))
        assert file_id not in _listed(reader)
    mine = _ok(colleague.call("POST", "/v1/vector_stores", {"name": "Cole's"}))
    _not_found(colleague.call("POST", f"/v1/vector_stores/{mine['id']}/files", {"file_id": file_id}))
    _not_found(org["stranger"].call("GET", f"/v1/vector_stores/{shared['id']}/files/{file_id}"))
    assert viewer.call("DELETE", f"/v1/vector_stores/{shared['id']}/files/{file_id}").status_code == 403


def test_an_uploader_made_a_viewer_reads_its_files_and_deletes_none(local_env):
    """Ownership never outranks the role, as with a knowledge base."""
    name = f"e2e-files-demoted-{secrets.token_hex(4)}"
    new_key(local_env, name, "root")  # the organisation's first user, its admin
    uploader = Api(local_env["KB_API_URL"], new_key(local_env, name, "olga"))
    file_id = _ok(upload(uploader, "olga.md", NOTES))["id"]
    demoted = Api(local_env["KB_API_URL"], new_key(local_env, name, "olga", role="viewer"))
    assert file_id in _listed(demoted)
    assert demoted.call("GET", f"/v1/files/{file_id}/content").text == NOTES.decode()
    refused = demoted.call("DELETE", f"/v1/files/{file_id}")
    assert refused.status_code == 403 and "viewer" in refused.json()["error"]["message"]
    assert demoted.call("POST", "/v1/vector_stores", {"file_ids": [file_id]}).status_code == 403
    assert file_id in _listed(demoted)


def _ids(db, org_name: str, user: str) -> tuple[str, str]:
    row = db.execute("SELECT u.id, u.org_id FROM users u JOIN organizations o ON o.id = u.org_id"
                     " WHERE o.name = %s AND u.name = %s", (org_name, user)).fetchone()
    return row["id"], row["org_id"]


def test_files_stored_before_uploaders_were_recorded_stay_their_uploaders(org, db, s3, local_env):
    """An object of the older layout: no row, its uploader in its metadata only."""
    from chalicelib.storage import files

    editor, colleague = org["editor"], org["colleague"]
    user_id, org_id = _ids(db, org["name"], "ed")
    older = [f"file_{secrets.token_hex(8)}" for _ in range(2)]
    for file_id in older:
        s3.put_object(Bucket=local_env["KB_BUCKET"], Key=f"_files/{org_id}/{file_id}", Body=b"Written long ago.",
                      ContentType="text/plain", Metadata={"filename": "old.txt", "purpose": "assistants",
                                                          "user": user_id})
    # by id, before any deployment recorded it: its uploader's, nobody else's
    _not_found(colleague.call("GET", f"/v1/files/{older[0]}"))
    _not_found(org["admin"].call("GET", f"/v1/files/{older[0]}/content"))
    _not_found(colleague.call("DELETE", f"/v1/files/{older[0]}"))
    assert _ok(editor.call("GET", f"/v1/files/{older[0]}"))["filename"] == "old.txt"
    assert editor.call("GET", f"/v1/files/{older[0]}/content").text == "Written long ago."
    assert older[0] in _listed(editor)  # recorded by that request
    # the rest, as a deployment's migration step records them
    assert older[1] not in _listed(editor)
    assert files.record_bucket(local_env["DATABASE_URL"], s3, local_env["KB_BUCKET"]) >= 1
    assert older[1] in _listed(editor) and older[1] not in _listed(colleague)
    assert files.record_bucket(local_env["DATABASE_URL"], s3, local_env["KB_BUCKET"]) == 0  # once
    assert _ok(editor.call("DELETE", f"/v1/files/{older[1]}"))["deleted"] is True
    _not_found(editor.call("GET", f"/v1/files/{older[1]}"))


def test_the_database_keeps_a_file_to_its_uploader(org, db, local_env):
    """Row-level security: the functions' login, acting for a colleague of the same
    organisation, an admin included, reads none of the editor's rows."""
    import psycopg

    from chalicelib.storage.db import functions_login

    file_id = _ok(upload(org["editor"], "rls.md", NOTES))["id"]
    editor_id, org_id = _ids(db, org["name"], "ed")
    admin_id, _ = _ids(db, org["name"], "ada")
    with psycopg.connect(functions_login(local_env["DATABASE_URL"]), autocommit=True) as conn:
        def seen(user_id):
            conn.execute("SELECT set_config('kb.org_id', %s, false), set_config('kb.user_id', %s, false)",
                         (org_id, user_id))
            return [r[0] for r in conn.execute("SELECT id FROM files WHERE id = %s", (file_id,))]
        assert seen(editor_id) == [file_id]
        assert seen(admin_id) == []
        assert conn.execute("UPDATE files SET user_id = %s WHERE id = %s", (admin_id, file_id)).rowcount == 0


def test_file_content_is_plain_text_never_the_uploaders_type(org):
    page = b"<html><body><script>alert(document.cookie)</script></body></html>"
    file_id = _ok(upload(org["editor"], "page.html", page, "text/html"))["id"]
    answer = org["editor"].call("GET", f"/v1/files/{file_id}/content")
    assert answer.status_code == 200 and answer.content == page
    assert answer.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert answer.headers["X-Content-Type-Options"] == "nosniff"
    assert answer.headers["Content-Disposition"].startswith("attachment;")
    assert "page.html" in answer.headers["Content-Disposition"]


def test_the_sdk_reads_a_files_content_as_before(org, local_env):
    import openai

    client = openai.OpenAI(base_url=local_env["KB_API_URL"] + "/v1", api_key=org["editor"].key, max_retries=0)
    file_id = client.files.create(file=("sdk.md", NOTES), purpose="assistants").id
    assert client.files.content(file_id).text == NOTES.decode()
    stranger = openai.OpenAI(base_url=local_env["KB_API_URL"] + "/v1", api_key=org["colleague"].key, max_retries=0)
    with pytest.raises(openai.NotFoundError):
        stranger.files.content(file_id)
