"""The deployment's migrations as a Lambda function (Chalice's blueprint; app.py registers
it): CloudFormation's custom resource applies the pending ones. Lambda imports this module
by itself, so it starts the process here."""
from chalice import Blueprint

from chalicelib import process
from chalicelib.storage import migrate as migrations

process.start()
events = Blueprint(__name__)


@events.lambda_function(name="migrate")
def migrate(event, context):
    """CloudFormation custom resource: the deployment applies pending migrations."""
    return migrations.handle_custom_resource(event, context)
