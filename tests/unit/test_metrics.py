"""The service's EMF metrics (chalicelib/metrics.py) as CloudWatch reads them, and seed
004's three under its own names: documents uploaded, embedding duration, query duration."""
import json

from chalicelib import metrics
from chalicelib.ingestion import steps


def _emf(capsys) -> list[dict]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith('{"_aws"')]


def _names(line: dict) -> list[str]:
    return [m["Name"] for m in line["_aws"]["CloudWatchMetrics"][0]["Metrics"]]


def test_an_upload_counts_by_type_and_result(capsys):
    capsys.readouterr()
    metrics.record_upload("application/pdf", "updated")
    [line] = _emf(capsys)
    assert _names(line) == ["knowledge_documents_uploaded_total"]
    assert line["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["mime_type", "status"]]
    assert (line["mime_type"], line["status"], line["knowledge_documents_uploaded_total"]) == (
        "application/pdf", "updated", [1.0])


def test_the_pipeline_times_each_embedding_batch(capsys):
    texts = [f"The pump's filter is rinsed monthly, part {i}." for i in range(3)]
    capsys.readouterr()
    vectors = steps._embedded({"embedding_provider": "local", "embedding_model": "all-MiniLM-L6-v2"}, texts)
    assert len(vectors) == 3 and len(vectors[0]) == 384
    [line] = _emf(capsys)
    assert _names(line) == ["knowledge_embedding_generation_duration_seconds"]
    assert (line["provider"], line["model"]) == ("local", "all-MiniLM-L6-v2")
    assert line["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Unit"] == "Seconds"
    assert 0 < line["knowledge_embedding_generation_duration_seconds"][0] < 60


def test_an_upload_s_type_is_one_of_a_few_or_other(capsys):
    capsys.readouterr()
    metrics.record_upload("Text/Markdown; charset=utf-8", "added")
    metrics.record_upload("application/x-made-up-by-the-caller", "added")
    assert [line["mime_type"] for line in _emf(capsys)] == ["text/markdown", "other"]
