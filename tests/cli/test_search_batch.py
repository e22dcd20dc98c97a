"""kb search --batch FILE: a file of searches answered in one request."""
import json

from tests.cli.conftest import rendered


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


def test_the_table_names_the_other_documents_of_a_repeated_passage():
    """kb search's table: a passage other documents repeat says where else it is."""
    from kbcli.commands.search import render_results

    data = {"results": [
        {"rank": 1, "similarity": 0.8, "source": "storage.txt", "content": "Backups are kept ninety days.",
         "alsoIn": [{"path": "wiki/storage.html", "source": "storage.html"}, {"path": None, "source": "Backups"}]},
        {"rank": 2, "similarity": 0.5, "source": "canteen.txt", "content": "Lunch from noon.", "alsoIn": []}],
        "resultCount": 2, "metadata": {"strategy": "hybrid", "totalTokensUsed": 12, "omittedCount": 0, "tookMs": 3}}
    printed = rendered(render_results, data, full=False, several=False)
    assert "storage.txt (also in wiki/storage.html, Backups)" in printed
    assert "canteen.txt" in printed and "canteen.txt (also in" not in printed
