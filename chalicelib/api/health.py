"""GET /health, without authentication: whether the database, Redis and the bucket answer."""
from chalice import Blueprint

from chalicelib.api.http import error_response, ok
from chalicelib.errors import Unavailable
from chalicelib.health import check_health, failure_message

blueprint = Blueprint(__name__)


@blueprint.route("/health", methods=["GET"])
def health():
    report = check_health()
    if report["status"] == "ok":
        return ok(report)
    return error_response(Unavailable(failure_message(report), code="UNHEALTHY", details=report))
