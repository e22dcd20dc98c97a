"""A document from a URL (POST .../documents {"url"}: seed 004's originalUrl): the page or
file is fetched by the API and ingested as if its bytes had been uploaded inline.

The service, not the caller, opens the connection, so a URL must not reach inside the
deployment: on AWS every address a name resolves to must be public (no loopback,
private, link-local such as the instance metadata service at 169.254.169.254, or
reserved range), and the connection goes to the address that was checked (the name is
resolved once; DNS cannot answer differently between the check and the connect).
Redirects are followed by hand, each hop checked the same way. The local stack allows
private addresses (its test servers are on 127.0.0.1): URL_PRIVATE_ADDRESSES=allow."""
import ipaddress
import posixpath
import socket
from dataclasses import dataclass
from typing import Optional
from urllib.parse import unquote, urljoin, urlsplit

import urllib3

from chalicelib import limits
from chalicelib.errors import Invalid, TooLarge

FIELD = "url"


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
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def _resolve(host: str, port: int, allow_private: bool) -> str:
    """The address to connect to: the first the name resolves to, after every one of them
    passed the check (a name with one private address among public ones is refused)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise _refuse(f"the host {host} does not resolve") from None
    addresses = [info[4][0] for info in infos]
    if not allow_private:
        for address in addresses:
            if not _public(address):
                raise _refuse(f"the host {host} is at {address}, an address inside a network (loopback, private,"
                              " link-local or reserved): only public addresses are fetched")
    return addresses[0]


def _filename(response: urllib3.BaseHTTPResponse, url: str) -> str:
    disposition = response.headers.get("Content-Disposition") or ""
    for part in disposition.split(";"):
        name, _, value = part.strip().partition("=")
        if name.lower() == "filename" and value.strip('" '):
            return posixpath.basename(value.strip('" ').replace("\\", "/"))
    segment = posixpath.basename(unquote(urlsplit(url).path))
    return segment or "index.html"


def _read(response: urllib3.BaseHTTPResponse, max_bytes: int) -> bytes:
    declared = response.headers.get("Content-Length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        raise TooLarge(f"{FIELD}: the server says {declared} bytes, over the limit of {max_bytes}")
    body = bytearray()
    for block in response.stream(64 * 1024):
        body += block
        if len(body) > max_bytes:
            raise TooLarge(f"{FIELD}: the answer is over the limit of {max_bytes} bytes")
    return bytes(body)


def fetch(url: str, *, max_bytes: int, allow_private: bool) -> Fetched:
    """GET the URL (http or https), following up to limits.URL_REDIRECTS redirects; a
    4xx that names the problem for anything that is not a 2xx with a body."""
    current = url
    for _ in range(limits.URL_REDIRECTS + 1):
        parts = urlsplit(current)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise _refuse(f"{current} is not an http or https URL")
        if parts.username or parts.password:
            raise _refuse("credentials in the URL are not sent; give a URL that needs none")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        address = _resolve(parts.hostname, port, allow_private)
        timeout = urllib3.Timeout(connect=limits.URL_CONNECT_SECONDS, read=limits.URL_READ_SECONDS)
        if parts.scheme == "https":  # to the address checked, with the name for SNI and the certificate
            pool = urllib3.HTTPSConnectionPool(address, port, timeout=timeout, retries=False,
                                               server_hostname=parts.hostname, assert_hostname=parts.hostname)
        else:
            pool = urllib3.HTTPConnectionPool(address, port, timeout=timeout, retries=False)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        host = parts.hostname if parts.port is None else f"{parts.hostname}:{parts.port}"
        try:
            response = pool.urlopen("GET", target, headers={"Host": host, "User-Agent": limits.URL_USER_AGENT,
                                                            "Accept": "*/*"},
                                    redirect=False, preload_content=False)
        except urllib3.exceptions.HTTPError as err:
            raise _refuse(f"{current} could not be fetched: {type(err).__name__}") from None
        try:
            if response.status in (301, 302, 303, 307, 308) and response.headers.get("Location"):
                current = urljoin(current, response.headers["Location"])
                continue
            if not 200 <= response.status < 300:
                raise _refuse(f"the server answered {response.status} for {current}")
            try:
                content = _read(response, max_bytes)
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
