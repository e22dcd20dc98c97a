"""The service's one error family. Domain code raises a kind (NotFound, Invalid…)
with a stable code and a message that names the field or the thing; the edges
(the HTTP API and the kb_search Lambda) turn the kind into a status in one table,
`chalicelib.api.http.STATUS`."""
from typing import Any, Optional


class ServiceError(Exception):
    code = "INTERNAL_ERROR"

    def __init__(self, message: str, *, code: Optional[str] = None, details: Any = None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.details = details


class Invalid(ServiceError):
    """The request cannot be served as written; the message starts with the field."""
    code = "INVALID_INPUT"

    @classmethod
    def field(cls, name: str, why: str, *, code: Optional[str] = None) -> "Invalid":
        return cls(f"{name}: {why}", code=code)


class Unauthorized(ServiceError):
    code = "UNAUTHORIZED"


class Forbidden(ServiceError):
    code = "FORBIDDEN"


class NotFound(ServiceError):
    code = "NOT_FOUND"

    @classmethod
    def thing(cls, what: str, ident: str) -> "NotFound":
        return cls(f"{what} {ident} was not found")


class MethodNotAllowed(ServiceError):
    code = "METHOD_NOT_ALLOWED"


class Conflict(ServiceError):
    code = "CONFLICT"


class TooLarge(ServiceError):
    code = "FILE_TOO_LARGE"


class Unsupported(ServiceError):
    code = "UNSUPPORTED_TYPE"


class Throttled(ServiceError):
    """Too many requests; retry_after (seconds) becomes the Retry-After header."""
    code = "THROTTLED"

    def __init__(self, message: str, *, retry_after: int, code: Optional[str] = None):
        super().__init__(message, code=code, details={"retryAfterSeconds": retry_after})
        self.retry_after = retry_after


class BadUpstream(ServiceError):
    """A service we called answered something unusable (a language model's malformed output)."""
    code = "BAD_UPSTREAM"


class Unavailable(ServiceError):
    """A dependency does not answer (the health check's verdict, among others); with
    retry_after (seconds), the Retry-After header of the 503."""
    code = "UNAVAILABLE"

    def __init__(self, message: str, *, code: Optional[str] = None, details: Any = None,
                 retry_after: Optional[int] = None):
        super().__init__(message, code=code, details=details)
        self.retry_after = retry_after


class Transient(Unavailable):
    """A fault worth retrying: the database, S3 or an embedding provider did not answer.
    The ingestion state machine retries it by this class name (infra/ingestion.asl.json);
    an API caller gets a 503 and may retry."""
