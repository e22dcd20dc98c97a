"""bench/report.py writes docs/benchmarks.* from one whole run only: results written outside the
run's start and end make a report partial, and a partial report goes elsewhere."""
import json
import os
import sys
import time

import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import report  # noqa: E402


@pytest.fixture
def results(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "RESULTS", tmp_path)
    monkeypatch.setattr(report, "git_commit", lambda: "abc123def456")
    return tmp_path


def _written(path, at: float):
    path.write_text("{}")
    os.utime(path, (at, at))
    return path


def test_a_run_records_its_date_commit_and_load_average(results):
    run = report.start_run(quick=False)
    assert json.loads((results / "run.json").read_text())["endedAt"] is None  # not a whole run yet
    assert report.from_other_runs(run, [_written(results / "retrieval.json", time.time())]) == ["retrieval.json"]
    time.sleep(0.01)
    run = report.end_run(run, quick=False)
    figures = report.run_json(run, [])
    assert figures["commit"] == "abc123def456" and figures["date"] == run["startedAt"][:10]
    assert figures["wholeRun"] is True and figures["fromOtherRuns"] == []
    assert isinstance(figures["loadAverage"]["start"], float) and isinstance(figures["loadAverage"]["end"], float)
    assert not (results / "run-quick.json").exists()  # a quick run keeps a record of its own


def test_results_of_another_run_make_the_report_partial(results):
    run = {"startedAt": "2026-11-26T09:00:00+00:00", "endedAt": "2026-11-26T12:00:00+00:00"}
    start = report.datetime.fromisoformat(run["startedAt"]).timestamp()
    inside = _written(results / "retrieval.json", start + 3600)
    later = _written(results / "load.json", start + 3 * 86400)  # `bench/load.py` run again on its own
    assert report.from_other_runs(run, [inside]) == []
    assert report.from_other_runs(run, [inside, later]) == ["load.json"]
    assert report.from_other_runs(None, [inside]) == ["retrieval.json"]  # no run recorded at all
    assert report.run_json(run, ["load.json"])["wholeRun"] is False
    assert report.report_dir(quick=False, others=["load.json"]) == results / "partial"
    assert report.report_dir(quick=False, others=[]) == ROOT / "docs"
    assert report.report_dir(quick=True, others=[]) == results


def test_no_benchmark_but_the_whole_run_writes_into_docs():
    """The scripts that once merged their own section into docs/benchmarks.* (--docs, --scale-only) are gone."""
    for script in ("chunking.py", "load.py", "model_precision.py", "report.py"):
        source = (ROOT / "bench" / script).read_text()
        assert "--docs" not in source and "--scale-only" not in source, script
    assert not hasattr(report, "write_section_docs") and not hasattr(report, "scale_only")


def test_the_manuals_summary_counts_each_strategy_asked_including_hybrid_at_other_weights():
    import manuals

    def row(strategy, split, answered):
        return {"strategy": strategy, "split": split, "answerInTop3": answered, "answerInTop10": True,
                "pageInTop3": answered, "navigationInTop5": False, "top3Tokens": 100}

    rows = [row("semantic", "dev", True), row("hybrid", "dev", False), row("hybrid 0.7", "dev", True),
            row("semantic", "heldout", False), row("hybrid", "heldout", True), row("hybrid 0.7", "heldout", True)]
    summary = manuals.summary(rows)
    assert [k for k in summary if k.endswith("/all")] == ["semantic/all", "hybrid/all", "hybrid 0.7/all"]
    assert (summary["hybrid 0.7/all"]["answerInTop3"], summary["hybrid/dev"]["answerInTop3"]) == (2, 0)
    assert (summary["hybrid/dev"]["answerInTop10"], summary["semantic/all"]["answerInTop10"]) == (1, 2)
    assert "| hybrid 0.7 | heldout | 1/1 (100%) | 1/1 | 1/1 |" in manuals.report(
        {"files": {"p": 1}, "questions": 2, "summary": summary})
