"""kb search --batch FILE: a file of searches answered in one request."""
import json


def test_search_batch_from_json_lines_and_from_a_json_list(cli, kb, tmp_path):
    cli.json("entries", "add", "--kb", kb, "--title", "Batch lamp", "--content",
             "The batch lamp glows amber while the pump primes.")
    lines = tmp_path / "searches.jsonl"
    lines.write_text(json.dumps({"query": "amber lamp", "topK": 1}) + "\n\n"
                     + json.dumps({"query": "amber lamp", "topK": 99}) + "\n")
    done = cli.run("search", "--batch", str(lines), "--kb", kb, "--json", expect=1)  # one search failed
    data = json.loads(done.stdout)
    assert [(i["index"], i["success"]) for i in data["results"]] == [(0, True), (1, False)]
    assert data["results"][0]["data"]["results"][0]["source"] == "Batch lamp"
    assert data["results"][1]["error"]["message"].startswith("topK:")
    listed = tmp_path / "searches.json"
    listed.write_text(json.dumps([{"query": "amber lamp", "knowledgeBaseIds": [kb], "fields": ["summary"]}]))
    shown = cli.run("search", "--batch", str(listed), "--strategy", "keyword")
    assert "Batch lamp" in shown.stdout and "1 of 1 searches answered" in shown.stdout
    (tmp_path / "broken.json").write_text("{not json")
    cli.error("search", "--batch", str(tmp_path / "broken.json"), code="INVALID_OPTION", expect=2)
