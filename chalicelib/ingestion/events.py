"""The ingestion state machine's steps as Lambda functions (Chalice's blueprint; app.py
registers it). Lambda imports this module by itself, so it starts the process here. The
pipeline acts for whoever may write the bucket: every organisation (row-level security,
storage/db.py)."""
from chalice import Blueprint

from chalicelib import process
from chalicelib.ingestion import steps
from chalicelib.storage import for_every_organisation

process.start()
events = Blueprint(__name__)


@events.lambda_function(name="pipeline_extract")
@for_every_organisation
def pipeline_extract(event, context):
    return steps.extract_step(event)


@events.lambda_function(name="pipeline_chunk")
@for_every_organisation
def pipeline_chunk(event, context):
    return steps.chunk_step(event)


@events.lambda_function(name="pipeline_embed")
@for_every_organisation
def pipeline_embed(event, context):
    return steps.embed_step(event)


@events.lambda_function(name="pipeline_store")
@for_every_organisation
def pipeline_store(event, context):
    return steps.store_step(event)


@events.lambda_function(name="pipeline_finalize")
@for_every_organisation
def pipeline_finalize(event, context):
    return steps.finalize_step(event)


@events.lambda_function(name="pipeline_mark_failed")
@for_every_organisation
def pipeline_mark_failed(event, context):
    return steps.mark_failed_step(event)
