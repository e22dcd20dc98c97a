class IngestionError(Exception):
    """A document that cannot be ingested, with a stable code for clients.

    Step Functions sees the class name as the error name; the code and message
    travel in the JSON message so MarkFailed can store both."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        import json

        return json.dumps({"code": self.code, "message": self.message})
