"""The Chalice app: blueprints and Lambda entry points, no logic."""
import logging

from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from chalice import Chalice

from chalicelib import jobs, process
from chalicelib.api import (agents, bedrock_compat, console, documents, edge, health, keys, knowledge, knowledge_bases,
                            mcp, openai_compat, search)
from chalicelib.api.direct_invoke import handle_kb_search
from chalicelib.documents import reconcile, trigger
from chalicelib.ingestion import steps
from chalicelib.knowledge import jobs as extraction_jobs  # noqa: F401 - registers its handler with jobs
from chalicelib.knowledge_bases import rebuild  # noqa: F401 - registers its handler with jobs
from chalicelib.storage import for_every_organisation
from chalicelib.storage import migrate as migrations

process.keep_freed_memory()  # for numpy's passes over BM25's postings
app = Chalice(app_name="kb-service")
app.log.setLevel(logging.INFO)
logging.getLogger("chalicelib").setLevel(logging.INFO)
# Every chalicelib log line as JSON through the pipeline's Logger, so a line logged
# during a step (a provider's retry, a dropped connection) names its document and run.
copy_config_to_registered_loggers(source_logger=steps.logger, include={"chalicelib"})
app.register_blueprint(knowledge_bases)
app.register_blueprint(documents)
app.register_blueprint(search)
app.register_blueprint(agents)
app.register_blueprint(knowledge)
app.register_blueprint(health)
app.register_blueprint(keys)
app.register_blueprint(mcp)
app.register_blueprint(console)
app.register_blueprint(openai_compat)  # OpenAI's vector stores and files under /v1
app.register_blueprint(bedrock_compat)  # Bedrock's Retrieve
# POST /v1/files bodies are multipart: API Gateway hands them over base64-encoded, byte for byte.
app.api.binary_types.append("multipart/form-data")
edge.install(app)  # after the blueprints: it reads their routes


# The pipeline acts for whoever may write the bucket: every organisation (row-level
# security, storage/db.py). The API and kb_search act for their caller's organisation.
@app.lambda_function(name="s3_trigger")
@for_every_organisation
def s3_trigger(event, context):
    return trigger.handle_event(event)


@app.lambda_function(name="pipeline_extract")
@for_every_organisation
def pipeline_extract(event, context):
    return steps.extract_step(event)


@app.lambda_function(name="pipeline_chunk")
@for_every_organisation
def pipeline_chunk(event, context):
    return steps.chunk_step(event)


@app.lambda_function(name="pipeline_embed")
@for_every_organisation
def pipeline_embed(event, context):
    return steps.embed_step(event)


@app.lambda_function(name="pipeline_store")
@for_every_organisation
def pipeline_store(event, context):
    return steps.store_step(event)


@app.lambda_function(name="pipeline_finalize")
@for_every_organisation
def pipeline_finalize(event, context):
    return steps.finalize_step(event)


@app.lambda_function(name="pipeline_mark_failed")
@for_every_organisation
def pipeline_mark_failed(event, context):
    return steps.mark_failed_step(event)


@app.lambda_function(name="pipeline_reconcile")
@for_every_organisation
def pipeline_reconcile(event, context):
    return reconcile.reconcile(event)


@app.lambda_function(name="kb_search")
def kb_search(event, context):
    return handle_kb_search(event)


# The jobs function: work after the request answered (a long conversation's extraction, a
# rebuild), invoked asynchronously by the API. Its name is older than its second job; a new
# name would replace the function on the next stack update.
@app.lambda_function(name="knowledge_extract")
def knowledge_extract(event, context):
    return jobs.run(event)


@app.lambda_function(name="migrate")
def migrate(event, context):
    """CloudFormation custom resource: the deployment applies pending migrations."""
    return migrations.handle_custom_resource(event, context)
