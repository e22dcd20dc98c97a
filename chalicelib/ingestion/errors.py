import json

from chalicelib.errors import ServiceError


class IngestionError(ServiceError):
    """A document that cannot be ingested, with a stable code for clients. A step
    returns it as data (RunState.failure); should one escape as an exception, its
    code and message travel in the JSON message so MarkFailed can store both."""

    def __init__(self, code: str, message: str):
        super().__init__(message, code=code)

    def __str__(self) -> str:
        return json.dumps({"code": self.code, "message": self.message})
