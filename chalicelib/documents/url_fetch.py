"""A document from a URL (POST .../documents {"url"}: seed 004's originalUrl): the page or
file is fetched by the API and ingested as if its bytes had been uploaded inline.

The service, not the caller, opens the connection, so a URL must not reach inside the
deployment: on AWS every address a name resolves to must be public (no loopback,
private, link-local such as the instance metadata service at 169.254.169.254, or
reserved range, nor one of those wrapped in an IPv6 address: IPv4-mapped, NAT64, 6to4,
Teredo), and the connection goes to the address that was checked (the name is resolved
once; DNS cannot answer differently between the check and the connect). Redirects are
followed by hand, each hop checked the same way. The local stack allows private
addresses (its test servers are on 127.0.0.1): URL_PRIVATE_ADDRESSES=allow.

The whole fetch, every hop and the name lookups included, ends within
limits.URL_TOTAL_SECONDS, each wait within what is left of it: a server that answers a
byte at a time cannot hold the API past API Gateway's 29 s."""
import ipaddress
import posixpath
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as LookupTimeout
from dataclasses import dataclass
from typing import Optional
from urllib.parse import SplitResult, unquote, urljoin, urlsplit

import urllib3

from chalicelib import limits
from chalicelib.errors import Invalid, TooLarge

FIELD = "url"
_REDIRECTS = (301, 302, 303, 307, 308)
# NAT64's well-known and local-use prefixes (RFC 6052, RFC 8215): the IPv4 address is the last 32 bits.
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))


@dataclass(frozen=True)
class Fetched:
    url: str  # the URL asked for (documents keep it as originalUrl)
    final_url: str  # after redirects
    content: bytes
    content_type: Optional[str]  # the server's, without parameters
    filename: str  # from Content-Disposition, else the last segment of the final URL's path


def _refuse(why: str) -> Invalid:
    return Invalid.field(FIELD, why, code="URL_NOT_FETCHED")


def _public(address: str) -> bool:
    """Every address this one stands for is global: an IPv6 address that carries an IPv4
    one (mapped, NAT64, 6to4, Teredo) is judged by that one too."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    carried = []
    if isinstance(ip, ipaddress.IPv6Address):
        carried += [ip.ipv4_mapped, ip.sixtofour, *(ip.teredo or ())]
        if any(ip in net for net in _NAT64):
            carried.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    return all(a.is_global and not a.is_multicast for a in (ip, *[c for c in carried if c is not None]))


class _Deadline:
    def __init__(self, seconds: float, url: str):
        self.end, self.url = time.monotonic() + seconds, url

    def left(self) -> float:
        left = self.end - time.monotonic()
        if left <= 0:
            raise _refuse(f"{self.url} took longer than {limits.URL_TOTAL_SECONDS} s to fetch")
        return left


def _resolve(host: str, port: int, allow_private: bool, deadline: _Deadline) -> str:
    """The address to connect to: the first the name resolves to, after every one of them
    passed the check (a name with one private address among public ones is refused)."""
    pool = ThreadPoolExecutor(max_workers=1)
    try:  # getaddrinfo has no timeout of its own
        infos = pool.submit(socket.getaddrinfo, host, port, type=socket.SOCK_STREAM).result(timeout=deadline.left())
    except LookupTimeout:
        raise _refuse(f"the host {host} did not resolve within the fetch's time") from None
    except (socket.gaierror, UnicodeError):
        raise _refuse(f"the host {host} does not resolve") from None
    finally:
        pool.shutdown(wait=False)
    addresses = [info[4][0] for info in infos]
    if not allow_private:
        for address in addresses:
            if not _public(address):
                raise _refuse(f"the host {host} is at {address}, an address inside a network (loopback, private,"
                              " link-local or reserved): only public addresses are fetched")
    return addresses[0]


def require_public_host(url: str, field: str) -> None:
    """An endpoint the service will call on a caller's word (a knowledge base's source bucket's
    endpointUrl): https, and every address its host resolves to public, or Invalid naming
    the field. The fetch's rules, without fetching anything."""
    try:
        parts, host, port = _parts(url)
        if parts.scheme != "https":
            raise _refuse(f"{url} is not an https URL")
        _resolve(host, port, allow_private=False, deadline=_Deadline(limits.URL_TOTAL_SECONDS, url))
    except Invalid as err:
        raise Invalid.field(field, err.message.split(": ", 1)[-1]) from None


def _parts(url: str) -> tuple[SplitResult, str, int]:
    """The URL's parts, its host as sent (IDNA, ASCII) and its port; a URL that does not
    parse (a port past 65535, a broken IPv6 literal, a name IDNA refuses) is refused."""
    try:
        parts = urlsplit(url)
        port = parts.port
        host = parts.hostname.encode("idna").decode("ascii") if parts.hostname else ""
    except (ValueError, UnicodeError):
        raise _refuse(f"{url} is not a URL this service can fetch") from None
    if parts.scheme not in ("http", "https") or not host:
        raise _refuse(f"{url} is not an http or https URL")
    if parts.username or parts.password:
        raise _refuse("credentials in the URL are not sent; give a URL that needs none")
    return parts, host, port or (443 if parts.scheme == "https" else 80)


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
