"""A knowledge base's chunking strategy through the deployed API: semantic chunks end
where a two-topic document changes topic (the local model embeds its sentences in the
Chunk step), where the fixed strategy puts both topics in one chunk."""
import base64

from tests.e2e.conftest import wait_for_status

BEES = ["Honey bees live in colonies ruled by a single queen.",
        "Worker bees gather nectar and pollen from flowers.",
        "In the hive, nectar is turned into honey and stored in wax combs.",
        "Beekeepers smoke the hive gently before opening it.",
        "A strong colony can hold fifty thousand bees in summer.",
        "Drones leave the hive only to mate with a queen."]
VOLCANOES = ["Volcanoes form where magma rises through the Earth's crust.",
             "Basaltic lava flows quickly and builds broad shield volcanoes.",
             "Explosive eruptions throw ash high into the stratosphere.",
             "Geologists measure ground swelling to forecast an eruption.",
             "Pyroclastic flows race down the slopes at hundreds of kilometres an hour.",
             "Old calderas often fill with water and become lakes."]
TEXT = " ".join(BEES + VOLCANOES)  # 139 tokens: one chunk of 300 holds it all


def _ingested_chunks(api, db, strategy: str) -> list[str]:
    answer = api.call("POST", "/knowledge-bases", {"name": f"Chunking {strategy}", "chunking": {
        "chunkTokens": 300, "chunkOverlap": 30, "strategy": strategy}})
    assert answer.status_code == 201, answer.text
    kb = answer.json()["data"]
    assert kb["chunking"] == {"chunkTokens": 300, "chunkOverlap": 30, "strategy": strategy}
    upload = api.call("POST", f"/knowledge-bases/{kb['id']}/documents", {
        "filename": "nature.txt", "content": base64.b64encode(TEXT.encode()).decode()})
    assert upload.status_code == 202, upload.text
    doc, seen = wait_for_status(api, kb["id"], "nature.txt")
    assert doc["status"] == "PROCESSED", (doc, seen)
    rows = db.execute("SELECT content, start_char, end_char FROM chunks WHERE document_id = %s"
                      " ORDER BY chunk_index", (doc["id"],)).fetchall()
    assert all(TEXT[r["start_char"]:r["end_char"]].strip() == r["content"] for r in rows)
    return [r["content"] for r in rows]


def test_semantic_chunks_end_at_the_topic_change_and_fixed_ones_do_not(api, db):
    assert _ingested_chunks(api, db, "semantic") == [" ".join(BEES), " ".join(VOLCANOES)]
    assert _ingested_chunks(api, db, "fixed") == [TEXT]


def test_the_strategy_defaults_to_the_models_hierarchical_sizes_and_an_unknown_one_is_refused(api):
    answer = api.call("POST", "/knowledge-bases", {"name": "Default chunking"})
    assert answer.status_code == 201 and answer.json()["data"]["chunking"] == {
        "strategy": "hierarchical", "parentTokens": 500, "childTokens": 214, "chunkOverlap": 50}
    for strategy in ("recursive", 7, ""):
        answer = api.call("POST", "/knowledge-bases", {"name": "x", "chunking": {"strategy": strategy}})
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"]["message"] == "chunking.strategy: must be one of fixed, semantic, hierarchical"
