"""A document from a URL (POST .../documents {"url"}: seed 004's originalUrl): the page or
file is fetched by the API and ingested as if its bytes had been uploaded inline.

The service, not the caller, opens the connection, so a URL must not reach inside the
deployment (chalicelib/netrules.py: on AWS every address a name resolves to must be
public), and the connection goes to the address that was checked (the name is resolved
once; DNS cannot answer differently between the check and the connect). Redirects are
followed by hand, each hop checked the same way. The local stack allows private
addresses (its test servers are on 127.0.0.1): URL_PRIVATE_ADDRESSES=allow.

The whole fetch, every hop and the name lookups included, ends within
limits.URL_TOTAL_SECONDS, each wait within what is left of it: a server that answers a
byte at a time cannot hold the API past API Gateway's 29 s."""
import posixpath
import time
from dataclasses import dataclass
from typing import Optional
from urllib.parse import SplitResult, unquote, urljoin, urlsplit

import urllib3

from chalicelib import limits, netrules
from chalicelib.errors import Invalid, TooLarge

FIELD = "url"
_CODE = "URL_NOT_FETCHED"
_REDIRECTS = (301, 302, 303, 307, 308)


@dataclass(frozen=True)
class Fetched:
    url: str  # the URL asked for (documents keep it as originalUrl)
    final_url: str  # after redirects
    content: bytes
    content_type: Optional[str]  # the server's, without parameters
    filename: str  # from Content-Disposition, else the last segment of the final URL's path


def _refuse(why: str) -> Invalid:
    return Invalid.field(FIELD, why, code=_CODE)


class _Deadline:
    def __init__(self, seconds: float, url: str):
        self.end, self.url = time.monotonic() + seconds, url

    def left(self) -> float:
        left = self.end - time.monotonic()
        if left <= 0:
            raise _refuse(f"{self.url} took longer than {limits.URL_TOTAL_SECONDS} s to fetch")
        return left


def _resolve(host: str, port: int, allow_private: bool, deadline: _Deadline) -> str:
    return netrules.resolve(host, port, allow_private=allow_private, timeout=deadline.left(), field=FIELD,
                            code=_CODE)


def _parts(url: str) -> tuple[SplitResult, str, int]:
    return netrules.split_url(url, FIELD, _CODE)


def _filename(response: urllib3.BaseHTTPResponse, url: str) -> str:
    disposition = response.headers.get("Content-Disposition") or ""
    for part in disposition.split(";"):
        name, _, value = part.strip().partition("=")
        if name.lower() == "filename" and value.strip('" '):
            return posixpath.basename(value.strip('" ').replace("\\", "/"))
    segment = posixpath.basename(unquote(urlsplit(url).path))
    return segment or "index.html"


def _read(response: urllib3.BaseHTTPResponse, max_bytes: int, deadline: _Deadline) -> bytes:
    declared = response.headers.get("Content-Length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        raise TooLarge(f"{FIELD}: the server says {declared} bytes, over the limit of {max_bytes}")
    body = bytearray()
    while block := response.read1(64 * 1024):  # what one receive brings: the deadline is checked between
        body += block
        if len(body) > max_bytes:
            raise TooLarge(f"{FIELD}: the answer is over the limit of {max_bytes} bytes")
        deadline.left()
    return bytes(body)


def fetch(url: str, *, max_bytes: int, allow_private: bool) -> Fetched:
    """GET the URL (http or https), following up to limits.URL_REDIRECTS redirects; a
    4xx that names the problem for anything that is not a 2xx with a body."""
    current, deadline = url, _Deadline(limits.URL_TOTAL_SECONDS, url)
    for _ in range(limits.URL_REDIRECTS + 1):
        parts, host, port = _parts(current)
        address = _resolve(host, port, allow_private, deadline)
        left = deadline.left()
        timeout = urllib3.Timeout(connect=min(limits.URL_CONNECT_SECONDS, left), read=min(limits.URL_READ_SECONDS, left))
        if parts.scheme == "https":  # to the address checked, with the name for SNI and the certificate
            pool = urllib3.HTTPSConnectionPool(address, port, timeout=timeout, retries=False,
                                               server_hostname=host, assert_hostname=host)
        else:
            pool = urllib3.HTTPConnectionPool(address, port, timeout=timeout, retries=False)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        bracketed = f"[{host}]" if ":" in host else host
        try:
            response = pool.urlopen("GET", target, headers={
                "Host": bracketed if parts.port is None else f"{bracketed}:{parts.port}",
                "User-Agent": limits.URL_USER_AGENT, "Accept": "*/*"}, redirect=False, preload_content=False)
        except (urllib3.exceptions.HTTPError, UnicodeError) as err:
            raise _refuse(f"{current} could not be fetched: {type(err).__name__}") from None
        try:
            if response.status in _REDIRECTS and response.headers.get("Location"):
                try:
                    current = urljoin(current, response.headers["Location"])
                except ValueError:
                    raise _refuse(f"{current} redirects to a URL that does not parse") from None
                continue
            if not 200 <= response.status < 300:
                raise _refuse(f"the server answered {response.status} for {current}")
            try:
                content = _read(response, max_bytes, deadline)
            except urllib3.exceptions.HTTPError as err:
                raise _refuse(f"{current} could not be read to its end: {type(err).__name__}") from None
            if not content:
                raise _refuse(f"the server answered no bytes for {current}")
            content_type = (response.headers.get("Content-Type") or "").split(";")[0].strip().lower() or None
            return Fetched(url=url, final_url=current, content=content, content_type=content_type,
                           filename=_filename(response, current))
        finally:
            response.release_conn()
            pool.close()
    raise _refuse(f"more than {limits.URL_REDIRECTS} redirects from {url}")
