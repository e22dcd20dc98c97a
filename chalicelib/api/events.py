"""The API's functions other than HTTP (Chalice's blueprint; app.py registers it): a
search or tool call by direct invocation, acting for its caller's organisation, and the
work after a request answered (jobs.run: a long conversation's extraction, a rebuild),
invoked asynchronously by the API. Lambda imports this module by itself, so it starts the
process here."""
from chalice import Blueprint

from chalicelib import jobs, process
from chalicelib.api.direct_invoke import handle_kb_search
from chalicelib.knowledge import jobs as extraction_jobs  # noqa: F401 - registers its handler with jobs
from chalicelib.knowledge_bases import rebuild  # noqa: F401 - registers its handler with jobs

process.start()
events = Blueprint(__name__)


@events.lambda_function(name="kb_search")
def kb_search(event, context):
    return handle_kb_search(event)


# Work after the request answered: knowledge extraction and rebuilds (chalicelib/jobs.py).
@events.lambda_function(name="jobs")
def run_jobs(event, context):
    return jobs.run(event)
