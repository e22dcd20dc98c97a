"""Which hosts the service calls on a caller's word: a document's URL (documents/url_fetch.py)
and a source bucket's endpointUrl (sources/). The service, not the caller, opens the
connection, so a host must not reach inside the deployment: on AWS every address a name
resolves to must be public (no loopback, private, link-local such as the instance metadata
service at 169.254.169.254, or reserved range, nor one of those wrapped in an IPv6 address:
IPv4-mapped, NAT64, 6to4, Teredo). Each check raises errors.Invalid naming the caller's field."""
import ipaddress
import socket
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as LookupTimeout
from typing import Optional
from urllib.parse import SplitResult, urlsplit

from chalicelib.errors import Invalid

# NAT64's well-known and local-use prefixes (RFC 6052, RFC 8215): the IPv4 address is the last 32 bits.
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))


def is_public(address: str) -> bool:
    """Every address this one stands for is global: an IPv6 address that carries an IPv4
    one (mapped, NAT64, 6to4, Teredo) is judged by that one too."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    carried = []
    if isinstance(ip, ipaddress.IPv6Address):
        carried += [ip.ipv4_mapped, ip.sixtofour, *(ip.teredo or ())]
        if any(ip in net for net in _NAT64):
            carried.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    return all(a.is_global and not a.is_multicast for a in (ip, *[c for c in carried if c is not None]))


def split_url(url: str, field: str, code: Optional[str] = None) -> tuple[SplitResult, str, int]:
    """The URL's parts, its host as sent (IDNA, ASCII) and its port; a URL that does not
    parse (a port past 65535, a broken IPv6 literal, a name IDNA refuses), is not http or
    https, or carries credentials is refused."""
    try:
        parts = urlsplit(url)
        port = parts.port
        host = parts.hostname.encode("idna").decode("ascii") if parts.hostname else ""
    except (ValueError, UnicodeError):
        raise Invalid.field(field, f"{url} is not a URL this service can reach", code=code) from None
    if parts.scheme not in ("http", "https") or not host:
        raise Invalid.field(field, f"{url} is not an http or https URL", code=code)
    if parts.username or parts.password:
        raise Invalid.field(field, "credentials in the URL are not sent; give a URL that needs none", code=code)
    return parts, host, port or (443 if parts.scheme == "https" else 80)


def addresses(host: str, port: int, *, timeout: float, field: str, code: Optional[str] = None) -> list[str]:
    """Every address the name resolves to, within `timeout` (getaddrinfo has none of its own)."""
    pool = ThreadPoolExecutor(max_workers=1)
    try:
        infos = pool.submit(socket.getaddrinfo, host, port, type=socket.SOCK_STREAM).result(timeout=timeout)
    except LookupTimeout:
        raise Invalid.field(field, f"the host {host} did not resolve in time", code=code) from None
    except (socket.gaierror, UnicodeError, ValueError):
        raise Invalid.field(field, f"the host {host} does not resolve", code=code) from None
    finally:
        pool.shutdown(wait=False)
    return [info[4][0] for info in infos]


def resolve(host: str, port: int, *, allow_private: bool, timeout: float, field: str,
            code: Optional[str] = None) -> str:
    """The address to connect to: the first the name resolves to, after every one of them
    passed the check (a name with one private address among public ones is refused)."""
    found = addresses(host, port, timeout=timeout, field=field, code=code)
    if not allow_private:
        for address in found:
            if not is_public(address):
                raise Invalid.field(field, f"the host {host} is at {address}, an address inside a network (loopback,"
                                           " private, link-local or reserved): only public addresses are reached",
                                    code=code)
    return found[0]


def require_public_https(url: str, field: str, timeout: float) -> None:
    """An endpoint the service will call on a caller's word: https, and every address its
    host resolves to public."""
    parts, host, port = split_url(url, field)
    if parts.scheme != "https":
        raise Invalid.field(field, f"{url} is not an https URL")
    resolve(host, port, allow_private=False, timeout=timeout, field=field)
