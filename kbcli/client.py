"""The one HTTP client: authentication, the response envelope, and every way a request
can fail turned into a CliError that names the API's code and message."""
import re
import time
from typing import Any, Iterable, Optional

import httpx

from kbcli import __version__
from kbcli.config import Settings

TIMEOUT = httpx.Timeout(120.0, connect=10.0)  # a cold Lambda on the emulator can take seconds
THROTTLE_RETRIES = 3
MAX_RETRY_AFTER = 30.0


class CliError(Exception):
    """What the user sees: `code: message`, and the command exits with `exit_code`."""

    def __init__(self, code: str, message: str, *, status: Optional[int] = None, exit_code: int = 1):
        super().__init__(f"{code}: {message}")
        self.code, self.message, self.status, self.exit_code = code, message, status, exit_code

    def as_dict(self) -> dict:
        return {"code": self.code, "message": self.message, **({"status": self.status} if self.status else {})}


def error_from_response(response: httpx.Response) -> CliError:
    """The API's envelope error when there is one; otherwise whatever the gateway or
    S3 answered (an unknown route, an XML error), with the HTTP status as the code."""
    body: Any = None
    try:
        body = response.json()
    except ValueError:
        pass
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        error = body["error"]
        return CliError(str(error.get("code") or f"HTTP_{response.status_code}"),
                        str(error.get("message") or response.reason_phrase), status=response.status_code)
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        message = body["message"]
    elif "<Error>" in response.text:  # S3's XML error
        found = dict(re.findall(r"<(Code|Message)>([^<]*)</\1>", response.text))
        message = ": ".join(v for v in (found.get("Code"), found.get("Message")) if v) or response.reason_phrase
    else:
        message = " ".join(response.text.split())[:300] or response.reason_phrase
    return CliError(f"HTTP_{response.status_code}", message, status=response.status_code)


def _retry_after(response: httpx.Response) -> float:
    try:
        return min(MAX_RETRY_AFTER, max(0.0, float(response.headers.get("Retry-After", "1"))))
    except ValueError:
        return 1.0


class Client:
    def __init__(self, settings: Settings, *, need_key: bool = True):
        if not settings.api_url:
            raise CliError("NO_API_URL", "no API URL: set KB_API_URL, pass --api-url, or run inside a "
                                         "project whose .kb/local.env `make up` wrote", exit_code=2)
        if need_key and not settings.api_key:
            raise CliError("NO_API_KEY", "no API key: set KB_API_KEY or pass --api-key", exit_code=2)
        self.base_url = settings.api_url
        headers = {"User-Agent": f"kb-cli/{__version__}", "Accept": "application/json"}
        if settings.api_key:
            headers["Authorization"] = f"Bearer {settings.api_key}"
        self._http = httpx.Client(headers=headers, timeout=TIMEOUT)

    def close(self) -> None:
        self._http.close()

    def _send(self, method: str, url: str, **kwargs) -> httpx.Response:
        where = url.split("?")[0]
        for attempt in range(THROTTLE_RETRIES + 1):
            try:
                response = self._http.request(method, url, **kwargs)
            except httpx.ConnectError as err:
                raise CliError("CONNECTION_FAILED", f"cannot reach {where} ({err}); is the stack up"
                                                    " (`make up`) and KB_API_URL right?") from None
            except httpx.TimeoutException:
                raise CliError("TIMEOUT", f"no answer from {where} within the time limit") from None
            except httpx.HTTPError as err:
                raise CliError("HTTP_ERROR", f"{method} {where} failed: {err}") from None
            # A throttled request was refused whole, so sending it again is safe.
            if response.status_code != 429 or attempt == THROTTLE_RETRIES:
                break
            time.sleep(_retry_after(response))
        return response

    def request(self, method: str, path: str, *, json: Any = None, params: Optional[dict] = None,
                raw: bool = False) -> Any:
        """The envelope's `data`; with raw, the whole JSON body of a 2xx answer (the
        tool-invoke route answers the tool result itself, not an envelope)."""
        params = {k: v for k, v in (params or {}).items() if v is not None}
        response = self._send(method, self.base_url + path, json=json, params=params or None)
        if not response.is_success:
            raise error_from_response(response)
        try:
            body = response.json()
        except ValueError:
            raise CliError(f"HTTP_{response.status_code}", "the API answered something that is not JSON: "
                           + " ".join(response.text.split())[:200], status=response.status_code) from None
        if raw:
            return body
        if not isinstance(body, dict) or "data" not in body:
            raise CliError("UNEXPECTED_ANSWER", f"{method} {path} answered without a data envelope")
        return body["data"]

    def get(self, path: str, **kwargs) -> Any:
        return self.request("GET", path, **kwargs)

    def every(self, path: str, params: Optional[dict] = None) -> list:
        """Every item of a paged list ({items, nextToken}), from the page params name on."""
        params = params or {}
        data = self.get(path, params=params)
        items = list(data["items"])
        while data.get("nextToken"):
            data = self.get(path, params={**params, "nextToken": data["nextToken"]})
            items += data["items"]
        return items

    def post(self, path: str, json: Any = None, **kwargs) -> Any:
        return self.request("POST", path, json=json if json is not None else {}, **kwargs)

    def patch(self, path: str, json: Any, **kwargs) -> Any:
        return self.request("PATCH", path, json=json, **kwargs)

    def delete(self, path: str, **kwargs) -> Any:
        return self.request("DELETE", path, **kwargs)

    def put_bytes(self, url: str, headers: dict, chunks: Iterable[bytes]) -> None:
        """A presigned PUT straight to S3 (no API key: the URL is the credential).
        The declared Content-Length keeps httpx from sending it chunked, which the
        signature would refuse."""
        try:
            response = httpx.put(url, headers=headers, content=chunks, timeout=TIMEOUT)
        except httpx.HTTPError as err:
            raise CliError("UPLOAD_FAILED", f"the PUT to S3 failed: {err}") from None
        if not response.is_success:
            err = error_from_response(response)
            raise CliError("UPLOAD_FAILED", f"S3 answered {response.status_code}: {err.message}",
                           status=response.status_code)
