"""The Chalice app: the HTTP blueprints and the blueprints of event handlers (each domain's
events.py: the functions' handlers live there, and Lambda imports them from there), no logic."""
import logging

from chalice import Chalice

from chalicelib import process
from chalicelib.api import (agents, bedrock_compat, console, documents, edge, health, keys, knowledge, knowledge_bases,
                            mcp, openai_compat, search)
from chalicelib.api.events import events as api_events
from chalicelib.documents.events import events as document_events
from chalicelib.ingestion.events import events as pipeline_events
from chalicelib.storage.events import events as migration_events

process.start()
app = Chalice(app_name="kb-service")
app.log.setLevel(logging.INFO)
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
app.register_blueprint(document_events)  # s3_trigger, pipeline_reconcile
app.register_blueprint(pipeline_events)  # pipeline_extract ... pipeline_mark_failed
app.register_blueprint(api_events)  # kb_search, jobs
app.register_blueprint(migration_events)  # migrate
