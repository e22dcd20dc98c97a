"""Work after the request answered: the API records the work, then invokes the jobs
function (the `jobs` function, which JOBS_FUNCTION_NAME names) asynchronously
with a small event, and the function hands the event to the handler its shape names. Each
domain registers its own handler here (knowledge/jobs.py: extractions, by jobId;
knowledge_bases/rebuild.py: rebuilds, by rebuildId), so this module imports none of them."""
import json
import logging
import os
from typing import Callable

from botocore.exceptions import BotoCoreError, ClientError

from chalicelib.errors import Transient, Unavailable

logger = logging.getLogger(__name__)
Handler = Callable[[dict], dict]
_HANDLERS: dict[str, Handler] = {}


def handles(key: str) -> Callable[[Handler], Handler]:
    """Registers the decorated function as the handler of the events that carry `key`."""
    def register(handler: Handler) -> Handler:
        _HANDLERS[key] = handler
        return handler
    return register


def run(event: dict) -> dict:
    """The jobs function: the event to the handler of the key it carries."""
    for key, handler in _HANDLERS.items():
        if key in event:
            return handler(event)
    return {"ran": False, "reason": f"the event carries none of {', '.join(_HANDLERS) or 'no handler'}"}


def jobs_function() -> str:
    """The function that runs work after the request answered."""
    function = os.environ.get("JOBS_FUNCTION_NAME")
    if not function:
        raise Unavailable("work after the request is run by the jobs function, which this"
                          " deployment does not name (JOBS_FUNCTION_NAME)", code="EXTRACTION_UNAVAILABLE")
    return function


def invoke_later(payload: dict) -> None:
    """An asynchronous invocation of the jobs function; Transient when it could not be made."""
    from chalicelib.aws import client
    try:
        client("lambda").invoke(FunctionName=jobs_function(), InvocationType="Event",
                                Payload=json.dumps(payload).encode())
    except (BotoCoreError, ClientError) as err:
        logger.warning("could not invoke the jobs function: %s", type(err).__name__)
        raise Transient("the work could not be started; retry") from None
