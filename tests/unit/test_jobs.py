"""The jobs function's dispatch (chalicelib/jobs.py): an event goes to the handler its key
names, and the app registers both kinds of work after the request."""
import pytest

from chalicelib import jobs
from chalicelib.errors import Unavailable


def test_an_event_goes_to_the_handler_of_the_key_it_carries(monkeypatch):
    monkeypatch.setattr(jobs, "_HANDLERS", {})
    jobs.handles("jobId")(lambda event: {"ran": True, "by": "extraction", "event": event})
    jobs.handles("rebuildId")(lambda event: {"ran": True, "by": "rebuild"})
    assert jobs.run({"jobId": "job_1", "orgId": "org"}) == {
        "ran": True, "by": "extraction", "event": {"jobId": "job_1", "orgId": "org"}}
    assert jobs.run({"rebuildId": "rebuild_1", "orgId": "org"})["by"] == "rebuild"
    ignored = jobs.run({"orgId": "org"})
    assert ignored["ran"] is False and "jobId" in ignored["reason"] and "rebuildId" in ignored["reason"]


def test_the_app_registers_extractions_and_rebuilds():
    import app  # noqa: F401 - the Lambda's module, whose imports register the handlers
    from chalicelib.knowledge import jobs as extraction_jobs
    from chalicelib.knowledge_bases import rebuild

    assert jobs._HANDLERS == {"jobId": extraction_jobs.run, "rebuildId": rebuild.run}


def test_without_the_function_named_work_after_the_request_is_unavailable(monkeypatch):
    monkeypatch.delenv("JOBS_FUNCTION_NAME", raising=False)
    with pytest.raises(Unavailable) as err:
        jobs.jobs_function()
    assert err.value.code == "EXTRACTION_UNAVAILABLE"
    monkeypatch.setenv("JOBS_FUNCTION_NAME", "kb-service-jobs")
    assert jobs.jobs_function() == "kb-service-jobs"
