"""A document's events as Lambda functions (Chalice's blueprint; app.py registers it): the
bucket's notifications, and the sweep that restarts what a lost event left behind. Lambda
imports this module by itself, so it starts the process here. Both act for whoever may
write the bucket: every organisation (row-level security, storage/db.py)."""
from chalice import Blueprint

from chalicelib import process
from chalicelib.documents import reconcile, trigger
from chalicelib.storage import for_every_organisation

process.start()
events = Blueprint(__name__)


@events.lambda_function(name="s3_trigger")
@for_every_organisation
def s3_trigger(event, context):
    return trigger.handle_event(event)


@events.lambda_function(name="pipeline_reconcile")
@for_every_organisation
def pipeline_reconcile(event, context):
    return reconcile.reconcile(event)
