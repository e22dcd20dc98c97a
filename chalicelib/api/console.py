"""GET /console: the web console's page and assets, without a key (the page asks for
one and sends it with every API call it makes); GET /console/settings.json: what the
page may know before it has a key (the demo key, on the local stack only)."""
import json

from chalice import Blueprint, Response

from chalicelib import console
from chalicelib.api.http import error_response
from chalicelib.errors import NotFound

blueprint = Blueprint(__name__)
SETTINGS = "settings.json"


def _asset_response(body: str, content_type: str, cache: str = "no-cache") -> Response:
    # no-cache: a redeploy shows at once (the files are about 60 KB in all)
    return Response(body=body, status_code=200, headers={
        "Content-Type": content_type, "Cache-Control": cache, **console.SECURITY_HEADERS})


@blueprint.route("/console", methods=["GET"])
def console_page():
    # /console/ would resolve the page's relative asset URLs one folder too deep
    path = (blueprint.current_request.context or {}).get("path") or ""
    if path.endswith("/"):
        return Response(body="", status_code=308, headers={"Location": "../console"})
    try:
        return _asset_response(*console.page())
    except NotFound as err:
        return error_response(err)


@blueprint.route("/console/{name}", methods=["GET"])
def console_asset(name):
    try:
        if name == SETTINGS:
            # it may hold the local demo key: never stored by a cache
            return _asset_response(json.dumps(console.settings()), "application/json", cache="no-store")
        return _asset_response(*console.asset(name))
    except NotFound as err:
        return error_response(err)
