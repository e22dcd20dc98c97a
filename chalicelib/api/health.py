"""GET /health, without authentication: whether the database, Redis and the bucket answer.
200 when they do (status "degraded", naming the slow ones, when some answer slowly), 503
only when one cannot be reached."""
from chalice import Blueprint

from chalicelib.api.http import error_response, ok
from chalicelib.errors import Unavailable
from chalicelib.health import check_health, failure_message

blueprint = Blueprint(__name__)


@blueprint.route("/health", methods=["GET"])
def health():
    report = check_health()
    if report["status"] != "unhealthy":
        return ok(report)
    return error_response(Unavailable(failure_message(report), code="UNHEALTHY", details=report))
