"""OpenAI's vector-store API through the openai SDK itself, against the deployed stack:
base_url is KB_API_URL + "/v1" and api_key the product's key; nothing else changes."""
import secrets

import openai
import pytest

from tests.e2e.conftest import new_key

pytestmark = pytest.mark.e2e

FILES = {
    "refunds.md": (b"# Refunds\n\nCustomers get their money back within 30 days of purchase: write to the"
                   b" support desk with the order number and the refund is paid to the original card.\n",
                   {"team": "billing", "year": 2024, "public": True}),
    "outage.md": (b"# Outage report\n\nThe storage cluster lost a disk controller at night; replicas took over"
                  b" and the database recovered without data loss after a failover of four minutes.\n",
                  {"team": "infra", "year": 2022, "public": False}),
    "onboarding.md": (b"# Onboarding\n\nNew engineers get a laptop, a badge and a mentor in their first week;"
                      b" the mentor walks them through the deployment pipeline and the on-call rota.\n",
                      {"team": "people", "year": 2023, "public": True}),
}


def _pdf(text: str) -> bytes:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("helvetica", size=12)
    pdf.multi_cell(0, 8, text)
    return bytes(pdf.output())


@pytest.fixture(scope="module")
def key(local_env):
    return new_key(local_env, f"e2e-openai-{secrets.token_hex(4)}", "sdk")


@pytest.fixture(scope="module")
def client(local_env, key):
    return openai.OpenAI(base_url=local_env["KB_API_URL"] + "/v1", api_key=key, max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def store(client):
    """A vector store holding FILES with their attributes, uploaded and polled by the SDK."""
    vs = client.vector_stores.create(name="SDK store", chunking_strategy={"type": "auto"})
    uploaded = {}
    for name, (content, attributes) in FILES.items():
        done = client.vector_stores.files.upload_and_poll(vector_store_id=vs.id, file=(name, content),
                                                          attributes=attributes, max_wait_seconds=180)
        uploaded[name] = done
    yield vs, uploaded
    try:
        client.vector_stores.delete(vs.id)
    except openai.NotFoundError:
        pass


def test_upload_and_poll_ends_completed_with_attributes(client, store):
    vs, uploaded = store
    for name, done in uploaded.items():
        assert done.status == "completed", (name, done.last_error)
        assert done.vector_store_id == vs.id and done.id.startswith("file_")
        assert done.attributes == FILES[name][1]
        assert done.usage_bytes == len(FILES[name][0])
    again = client.vector_stores.retrieve(vs.id)
    assert again.id == vs.id and again.name == "SDK store"
    assert again.file_counts.completed == 3 and again.file_counts.total == 3 and again.status == "completed"
    # The file itself, as files.retrieve sees it
    stored = client.files.retrieve(uploaded["refunds.md"].id)
    assert stored.filename == "refunds.md" and stored.bytes == len(FILES["refunds.md"][0])
    assert stored.purpose == "assistants"


def test_search_answers_openai_shape(client, store):
    vs, uploaded = store
    page = client.vector_stores.search(vs.id, query="how do I get my money back?")
    assert page.data, "no results"
    top = page.data[0]
    assert top.file_id == uploaded["refunds.md"].id and top.filename == "refunds.md"
    assert top.attributes == FILES["refunds.md"][1]
    assert top.content[0].type == "text" and "30 days" in top.content[0].text
    assert 0 < top.score <= 1
    assert page.search_query == ["how do I get my money back?"] and page.has_more is False


def test_search_filters_comparison_and_compound(client, store):
    vs, uploaded = store
    only_infra = client.vector_stores.search(vs.id, query="money back refund",
                                             filters={"type": "eq", "key": "team", "value": "infra"})
    assert {r.file_id for r in only_infra.data} == {uploaded["outage.md"].id}
    recent_public = client.vector_stores.search(vs.id, query="first week", filters={
        "type": "and", "filters": [{"type": "gte", "key": "year", "value": 2023},
                                   {"type": "eq", "key": "public", "value": True}]})
    assert {r.file_id for r in recent_public.data} == {uploaded["refunds.md"].id, uploaded["onboarding.md"].id}
    either = client.vector_stores.search(vs.id, query="disk", filters={
        "type": "or", "filters": [{"type": "in", "key": "team", "value": ["people", "infra"]},
                                  {"type": "lt", "key": "year", "value": 2000}]})
    assert {r.file_id for r in either.data} == {uploaded["outage.md"].id, uploaded["onboarding.md"].id}
    not_billing = client.vector_stores.search(vs.id, query="refund", filters={"type": "ne", "key": "team",
                                                                              "value": "billing"})
    assert uploaded["refunds.md"].id not in {r.file_id for r in not_billing.data}


def test_score_threshold_and_max_num_results(client, store):
    vs, uploaded = store
    query = "how do I get my money back?"
    everything = client.vector_stores.search(vs.id, query=query, max_num_results=10)
    assert len(everything.data) == 3
    one = client.vector_stores.search(vs.id, query=query, max_num_results=1)
    assert [r.file_id for r in one.data] == [uploaded["refunds.md"].id]
    # Each result shows the score the list is ordered by (hybrid's fused score), and the
    # threshold drops by that score: the list reads sorted, the threshold keeps its top.
    scores = [r.score for r in everything.data]
    assert scores == sorted(scores, reverse=True) and scores[0] > scores[-1]
    threshold = (scores[0] + scores[-1]) / 2
    kept = client.vector_stores.search(vs.id, query=query, ranking_options={"score_threshold": threshold})
    assert [(r.file_id, r.score) for r in kept.data] == [(r.file_id, r.score) for r in everything.data
                                                          if r.score >= threshold]
    assert 0 < len(kept.data) < 3


def test_a_pdf_goes_through_multipart_byte_for_byte(client, store):
    """API Gateway hands the multipart body over base64-encoded: a binary file arrives whole."""
    vs, _ = store
    pdf = _pdf("The lighthouse keeper trims the lamp wick every evening at dusk.")
    assert any(b > 0x7F for b in pdf)
    done = client.vector_stores.files.upload_and_poll(vector_store_id=vs.id, file=("keeper.pdf", pdf, "application/pdf"),
                                                      max_wait_seconds=180)
    assert done.status == "completed", done.last_error
    assert client.files.retrieve(done.id).bytes == len(pdf)
    hit = client.vector_stores.search(vs.id, query="who trims the lamp wick?", max_num_results=1).data[0]
    assert hit.file_id == done.id and "lighthouse" in hit.content[0].text
    client.vector_stores.files.delete(done.id, vector_store_id=vs.id)


def test_a_file_that_fails_has_last_error(client, store):
    vs, _ = store
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
    done = client.vector_stores.files.upload_and_poll(vector_store_id=vs.id, file=("picture.txt", png),
                                                      max_wait_seconds=180)
    assert done.status == "failed"
    assert done.last_error.code == "unsupported_file" and "UNSUPPORTED_TYPE" in done.last_error.message
    failed = client.vector_stores.files.list(vector_store_id=vs.id, filter="failed")
    assert [f.id for f in failed.data] == [done.id]
    client.vector_stores.files.delete(done.id, vector_store_id=vs.id)


def test_list_and_page_vector_store_files(client, store):
    vs, uploaded = store
    first = client.vector_stores.files.list(vector_store_id=vs.id, limit=2)
    assert len(first.data) == 2 and first.has_more
    everything = [f.id for f in client.vector_stores.files.list(vector_store_id=vs.id, limit=2)]  # auto-paging
    assert sorted(everything) == sorted(f.id for f in uploaded.values())
    completed = client.vector_stores.files.list(vector_store_id=vs.id, filter="completed")
    assert {f.id for f in completed.data} == {f.id for f in uploaded.values()}
    assert vs.id in {v.id for v in client.vector_stores.list(limit=100)}


def test_attributes_update(client, store):
    vs, uploaded = store
    file_id = uploaded["onboarding.md"].id
    changed = client.vector_stores.files.update(file_id, vector_store_id=vs.id,
                                                attributes={"team": "people", "year": 2025, "public": True})
    assert changed.attributes["year"] == 2025
    done = client.vector_stores.files.poll(file_id, vector_store_id=vs.id, max_wait_seconds=120)
    assert done.status == "completed" and done.attributes["year"] == 2025
    hits = client.vector_stores.search(vs.id, query="mentor", filters={"type": "eq", "key": "year", "value": 2025})
    assert {r.file_id for r in hits.data} == {file_id}


def test_errors_are_the_sdks_own_exceptions(client, store, local_env, key):
    vs, _ = store
    with pytest.raises(openai.BadRequestError) as bad:
        client.vector_stores.search(vs.id, query="x", filters={"type": "like", "key": "team", "value": "x"})
    assert bad.value.body["param"] == "filters.type" and "like" in bad.value.body["message"]
    with pytest.raises(openai.BadRequestError) as many:
        client.vector_stores.search(vs.id, query="x", max_num_results=50)
    assert many.value.body["param"] == "max_num_results" and "20" in many.value.body["message"]
    with pytest.raises(openai.BadRequestError) as expiring:
        client.vector_stores.create(name="x", expires_after={"anchor": "last_active_at", "days": 1})
    assert expiring.value.body["param"] == "expires_after"
    with pytest.raises(openai.NotFoundError):
        client.vector_stores.retrieve("kb_0000000000000000")
    with pytest.raises(openai.NotFoundError):
        client.vector_stores.files.retrieve("file_0000000000000000", vector_store_id=vs.id)
    with pytest.raises(openai.NotFoundError):
        client.vector_stores.files.create(vector_store_id=vs.id, file_id="file_0000000000000000")
    stranger = openai.OpenAI(base_url=local_env["KB_API_URL"] + "/v1", max_retries=0,
                             api_key=new_key(local_env, f"e2e-openai-other-{secrets.token_hex(4)}", "eve"))
    with pytest.raises(openai.NotFoundError):  # another organisation's store is not found, not forbidden
        stranger.vector_stores.search(vs.id, query="refund")
    with pytest.raises(openai.AuthenticationError) as unauthenticated:
        openai.OpenAI(base_url=local_env["KB_API_URL"] + "/v1", api_key="kbk_not-a-key", max_retries=0
                      ).vector_stores.list()
    assert unauthenticated.value.body["code"] == "invalid_api_key"


@pytest.mark.parametrize("options, param", [
    ({"ranking_options": {"ranker": []}}, "ranking_options.ranker"),
    ({"ranking_options": {"score_threshold": "high"}}, "ranking_options.score_threshold"),
    ({"ranking_options": "auto"}, "ranking_options"),
    ({"max_num_results": [5]}, "max_num_results"),
    ({"rewrite_query": {}}, "rewrite_query"),
    ({"filters": {"type": "and", "filters": [{"type": "eq", "key": ["team"], "value": "x"}]}}, "filters.filters[0].key"),
])
def test_a_wrong_type_is_a_bad_request_naming_the_param(client, store, options, param):
    with pytest.raises(openai.BadRequestError) as bad:
        client.vector_stores.search(store[0].id, query="refund", **options)
    assert bad.value.status_code == 400
    assert bad.value.body["param"] == param and bad.value.body["code"] == "invalid_type"
    assert bad.value.body["type"] == "invalid_request_error" and bad.value.body["message"].startswith(f"{param}: must be ")


def test_wrong_types_in_the_other_bodies_are_bad_requests(client, store):
    vs, uploaded = store
    file_id = uploaded["onboarding.md"].id
    for call, param in [
        (lambda: client.vector_stores.create(name=["x"]), "name"),
        (lambda: client.vector_stores.create(name="x", chunking_strategy={"type": "static", "static": "big"}),
         "chunking_strategy.static"),
        (lambda: client.vector_stores.update(vs.id, name=3), "name"),
        (lambda: client.vector_stores.files.create(vector_store_id=vs.id, file_id=file_id, attributes={"a": {}}),
         "attributes.a"),
        (lambda: client.vector_stores.files.update(file_id, vector_store_id=vs.id, attributes=[1]), "attributes"),
    ]:
        with pytest.raises(openai.BadRequestError) as bad:
            call()
        assert bad.value.body["param"] == param, bad.value.body


def llm_configured(lambda_client, local_env) -> bool:
    """Whether the API function has a chat model now (test_agent_knowledge.py sets one for a while)."""
    variables = lambda_client.get_function_configuration(FunctionName=local_env["KB_API_FUNCTION"])["Environment"]
    return bool(variables["Variables"].get("LLM_PROVIDER"))


def test_rewrite_query_without_a_model_is_a_bad_request(client, store, lambda_client, local_env):
    if llm_configured(lambda_client, local_env):
        pytest.skip("a chat model is configured on the API function right now")
    with pytest.raises(openai.BadRequestError) as rewrite:
        client.vector_stores.search(store[0].id, query="x", rewrite_query=True)
    assert rewrite.value.body["param"] == "rewrite_query" and "language model" in rewrite.value.body["message"]


def test_a_key_over_its_rate_gets_rate_limit_error(local_env):
    slow = openai.OpenAI(base_url=local_env["KB_API_URL"] + "/v1", max_retries=0,
                         api_key=new_key(local_env, f"e2e-openai-rate-{secrets.token_hex(4)}", "fast", rate=2))
    with pytest.raises(openai.RateLimitError) as limited:
        for _ in range(40):
            slow.vector_stores.list()
    assert limited.value.response.headers["Retry-After"]


def test_delete_file_from_store_then_store_and_file(client):
    vs = client.vector_stores.create(name="Deleted by the SDK")
    done = client.vector_stores.files.upload_and_poll(vector_store_id=vs.id, file=("gone.txt", b"Ephemeral words."),
                                                      max_wait_seconds=180)
    deleted = client.vector_stores.files.delete(done.id, vector_store_id=vs.id)
    assert deleted.deleted and deleted.id == done.id
    assert client.vector_stores.files.list(vector_store_id=vs.id).data == []
    assert client.files.retrieve(done.id).id == done.id  # the file stays until it is deleted itself
    assert client.files.delete(done.id).deleted
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve(done.id)
    assert client.vector_stores.delete(vs.id).deleted
    with pytest.raises(openai.NotFoundError):
        client.vector_stores.retrieve(vs.id)


@pytest.mark.parametrize("method, path, status, shape", [
    ("GET", "/v1/assistants", 404, "openai"),                 # an OpenAI path the product does not serve
    ("DELETE", "/v1/vector_stores", 405, "openai"),            # a route, not this method
    ("POST", "/knowledgebases/kb_x/ingest", 404, "bedrock"),   # a Bedrock path the product does not serve
    ("GET", "/knowledgebases/kb_x/retrieve", 400, "bedrock"),  # Retrieve is a POST: Bedrock answers 400 for 405
])
def test_unrouted_paths_answer_in_their_apis_own_error_shape(local_env, key, method, path, status, shape):
    """A client of either API reads its own error shape even where the product has no route:
    OpenAI's {"error": {message, type, code}}, Bedrock's {"message"} with x-amzn-ErrorType."""
    import requests

    answer = requests.request(method, local_env["KB_API_URL"] + path, headers={"Authorization": f"Bearer {key}"},
                              json={}, timeout=30)
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert "success" not in body, "the product's envelope"
    if shape == "openai":
        assert set(body) == {"error"} and body["error"]["message"] and "type" in body["error"]
    else:
        assert set(body) == {"message"} and body["message"]
        assert answer.headers["x-amzn-ErrorType"].split(":")[0].endswith("Exception")
