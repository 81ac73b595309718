"""Fetching a web page with httpx, within the WEB_* limits, and never from the user's own network.

A bookmark or a saved link must not be a way to reach the services on the user's machine or
network (a router's admin page, the embedder, Qdrant, the cloud's metadata address). So unless
WEB_ALLOW_PRIVATE=true, every connection, each redirect's included, goes through `Guard`: it
resolves the name itself, refuses an address that is not a public one (loopback, private,
link-local, shared, reserved, multicast; IPv4-mapped IPv6 read as IPv4) and connects to the very
address it checked, so a name whose DNS answer changes between a check and the connection
(rebinding) cannot slip through. No proxy is used (the environment's proxy settings are not
read): a proxy would resolve the name where the guard cannot see it.

Limits (settings): WEB_TIMEOUT for the whole fetch, robots.txt and redirects included (every
connect, read and write of the socket gets only what is left of it: a server trickling its
headers or body a byte at a time is cut off at the deadline), WEB_MAX_BYTES for the bytes on the
wire (Content-Length first, then as the body streams) and again for the bytes decoded (decoded
here as they stream, never more than a chunk past the limit: a gzip bomb costs no memory; one
content coding at most, gzip or deflate), WEB_MAX_REDIRECTS, WEB_CONTENT_TYPES. With
WEB_ROBOTS, a page its site's robots.txt disallows for our user agent is not fetched (RFC 9309:
a robots.txt missing or 4xx allows everything, one that fails to load allows nothing this time).
A refresh sends the ETag and Last-Modified it got: `304 Not Modified` costs no download.
Every failure is a FetchError whose message says why, for the sync's summary.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
import urllib.robotparser
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from email.message import Message
from typing import Any

import httpcore
import httpx

USER_AGENT = "personal-vector-mcp/0.1 (+a personal knowledge base fetching its user's bookmarks)"
ROBOTS_AGENT = "personal-vector-mcp"  # the token robots.txt rules name
CHUNK = 64 * 1024
CODINGS = ("gzip", "x-gzip", "deflate")  # the content codings read (decoded here, bounded)
ROBOTS_MAX_BYTES = 500_000  # RFC 9309 asks crawlers to read at least 500 KiB of it
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class FetchError(Exception):
    """A page that could not be fetched; str() says why (no page text in it)."""


class Refused(Exception):
    """A connection the guard refused (raised inside httpx's connect, caught by `fetch`)."""


# IPv6 prefixes whose last 32 bits are an IPv4 address a gateway may reach: IPv4-compatible
# (::/96), SIIT (::ffff:0:0:0/96), NAT64 (64:ff9b::/96 and the local-use 64:ff9b:1::/48)
_EMBEDDING = [ipaddress.ip_network(n) for n in ("::/96", "::ffff:0:0:0/96", "64:ff9b::/96",
                                                "64:ff9b:1::/48")]  # fmt: skip


def embedded(address: Address) -> list[Address]:
    """The address and every IPv4 address it carries (IPv4-mapped, -compatible, SIIT, NAT64,
    6to4, Teredo's client): a gateway on the way may connect to any of them."""
    found: list[Address] = [address]
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            found.append(address.ipv4_mapped)
        if any(address in net for net in _EMBEDDING):
            found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
        if address.sixtofour is not None:
            found.append(address.sixtofour)
        if address.teredo is not None:
            found.extend(address.teredo)
    return found


def is_public(address: Address) -> bool:
    """An address on the public internet: not loopback, private, link-local, shared (CGNAT),
    reserved, multicast or unspecified, nor an IPv6 form carrying such an IPv4 address."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return all(a.is_global and not a.is_multicast for a in embedded(address))


def resolve(host: str, port: int) -> list[str]:
    """The addresses `host` resolves to, as the system resolver answers now."""
    return [str(info[4][0]) for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)]


def no_deadline() -> float | None:
    return None


def left(
    deadline: Callable[[], float | None], timeout: float | None, late: type[Exception]
) -> float | None:
    """The timeout an operation gets: `timeout`, or less when `deadline()` comes first; `late`
    (an httpcore timeout, which httpx reports as one) once it is past."""
    at = deadline()
    if at is None:
        return timeout
    remaining = at - time.monotonic()
    if remaining <= 0:
        raise late("past the fetch's deadline")
    return remaining if timeout is None else min(timeout, remaining)


class Timed(httpcore.NetworkStream):
    """A connection whose every read and write gets at most what is left until `deadline()`
    (a monotonic time, None: no deadline): a per-read timeout alone lets a server trickling a
    byte at a time hold a fetch for ever."""

    def __init__(self, inner: httpcore.NetworkStream, deadline: Callable[[], float | None]):
        self.inner = inner
        self.deadline = deadline

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self.inner.read(max_bytes, left(self.deadline, timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.inner.write(buffer, left(self.deadline, timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self.inner.close()

    def start_tls(
        self,
        ssl_context: Any,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        timeout = left(self.deadline, timeout, httpcore.ConnectTimeout)
        return Timed(self.inner.start_tls(ssl_context, server_hostname, timeout), self.deadline)

    def get_extra_info(self, info: str) -> Any:
        return self.inner.get_extra_info(info)


@dataclass
class Guard(httpcore.SyncBackend):
    """httpcore's network backend, connecting only to addresses `allowed` accepts (by default
    public ones), to the address it checked (see the module docstring), each connection held
    to `deadline` (Timed)."""

    allowed: Callable[[Address], bool] = is_public
    resolve: Callable[[str, int], Iterable[str]] = field(
        default=lambda host, port: resolve(host, port)
    )
    deadline: Callable[[], float | None] = no_deadline

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        try:
            found = [ipaddress.ip_address(a.split("%", 1)[0]) for a in self.resolve(host, port)]
        except (OSError, UnicodeError) as exc:
            raise httpcore.ConnectError(f"cannot resolve {host} ({exc})") from None
        usable = [a for a in dict.fromkeys(found) if self.allowed(a)]
        if not usable:
            shown = ", ".join(str(a) for a in found) or "no address"
            raise Refused(
                f"{host} is {shown}, not a public address: pages on this machine or your own "
                "network are not fetched (WEB_ALLOW_PRIVATE=true allows them)"
            )
        timeout = left(self.deadline, timeout, httpcore.ConnectTimeout)
        stream = super().connect_tcp(
            str(usable[0]), port, timeout, local_address, socket_options=socket_options
        )
        return Timed(stream, self.deadline)


def everywhere(address: Address) -> bool:
    return True


@dataclass(frozen=True)
class Limits:
    """The WEB_* settings a fetch obeys."""

    timeout: float = 20.0
    max_bytes: int = 10_000_000
    max_redirects: int = 5
    content_types: tuple[str, ...] = (
        "text/html", "application/xhtml+xml", "application/pdf", "text/plain",
    )  # fmt: skip
    robots: bool = True
    allow_private: bool = False


@dataclass(frozen=True)
class Fetched:
    url: str  # where the page was found (after redirects)
    content_type: str  # its media type, lowercase, without parameters
    charset: str | None
    body: bytes
    etag: str | None
    last_modified: str | None


NOT_MODIFIED = "not modified"


def media_type(header: str | None) -> tuple[str, str | None]:
    """`text/html; charset=UTF-8` -> (`text/html`, `UTF-8`)."""
    message = Message()
    message["content-type"] = header or ""
    charset = message.get_param("charset")
    return message.get_content_type() if header else "", (
        charset if isinstance(charset, str) else None
    )


def sniffed(body: bytes) -> str:
    """A media type for a body served without one."""
    head = body[:512].lstrip().lower()
    if head.startswith(b"%pdf-"):
        return "application/pdf"
    if head.startswith((b"<!doctype html", b"<html", b"<head", b"<body")) or b"<html" in head:
        return "text/html"
    return "application/octet-stream"


def web_address(url: str) -> httpx.URL:
    """`url` as httpx reads it; FetchError when it is no http(s) address or cannot be one (a port
    out of range, a broken IPv6 literal, a host name IDNA refuses)."""
    try:
        address = httpx.URL(url)
    except (httpx.InvalidURL, ValueError) as exc:  # InvalidURL is no HTTPError
        raise FetchError(f"not a valid web address ({exc})") from None
    if address.port is not None and not 0 < address.port < 65536:  # httpx lets them through
        raise FetchError(f"not a valid web address (port {address.port})")
    if address.scheme not in ("http", "https"):
        raise FetchError(
            f"not a web address ({address.scheme or 'no'} scheme): only http and https"
        )
    return address


def inflate(chunks: Iterable[bytes], coding: str) -> Iterator[bytes]:
    """A gzip or deflate body decoded as it streams, CHUNK bytes at a time at most: the reader
    stops asking past its limit, so a bomb is never inflated further than that."""
    unpack = zlib.decompressobj(zlib.MAX_WBITS | 32)  # gzip or zlib, told by the header
    first = True
    try:
        for chunk in chunks:
            data = chunk
            while data and not unpack.eof:
                try:
                    out = unpack.decompress(data, CHUNK)
                except zlib.error:
                    if not (first and coding == "deflate"):
                        raise
                    unpack = zlib.decompressobj(-zlib.MAX_WBITS)  # raw deflate, as some send it
                    out = unpack.decompress(data, CHUNK)
                first = False
                data = unpack.unconsumed_tail
                yield out
        yield unpack.flush()
    except zlib.error as exc:
        raise FetchError(f"its {coding} encoding does not decode ({exc})") from None


class Fetcher:
    """One httpx client for a sync (connections kept alive per site), within `limits`; `allowed`
    replaces the guard's test of an address (tests allow one loopback address, refuse another)."""

    def __init__(self, limits: Limits, *, allowed: Callable[[Address], bool] | None = None):
        self.limits = limits
        test = allowed or (everywhere if limits.allow_private else is_public)
        transport = httpx.HTTPTransport(retries=0, trust_env=False)
        # httpx takes no network backend of its own: its pool is rebuilt with the guard's
        self._until = threading.local()  # the deadline of the fetch this thread runs
        guard = Guard(test, deadline=lambda: getattr(self._until, "at", None))
        transport._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(), network_backend=guard, retries=0
        )
        self.http = httpx.Client(
            transport=transport,
            timeout=httpx.Timeout(limits.timeout),
            follow_redirects=True,
            max_redirects=limits.max_redirects,
            headers={
                "User-Agent": USER_AGENT,
                "Accept": ", ".join(limits.content_types),
                "Accept-Encoding": "gzip, deflate",  # CODINGS: none that httpx would decode
            },
            trust_env=False,
        )
        self._robots: dict[str, urllib.robotparser.RobotFileParser | str] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Fetcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def fetch(
        self, url: str, *, etag: str | None = None, last_modified: str | None = None
    ) -> Fetched | str:
        """The page at `url`, or NOT_MODIFIED when the ETag/Last-Modified still hold;
        FetchError saying why not."""
        address = web_address(url)
        self._until.at = time.monotonic() + self.limits.timeout
        try:
            return self._fetch(address, etag, last_modified)
        finally:
            self._until.at = None

    def _fetch(
        self, address: httpx.URL, etag: str | None, last_modified: str | None
    ) -> Fetched | str:
        if self.limits.robots:
            self._check_robots(address)
        headers = {}
        if etag:
            headers["If-None-Match"] = etag
        if last_modified:
            headers["If-Modified-Since"] = last_modified
        try:
            with self.http.stream("GET", address, headers=headers) as response:
                if response.status_code == 304 and (etag or last_modified):
                    return NOT_MODIFIED
                if response.status_code >= 400:
                    raise FetchError(f"HTTP {response.status_code} {response.reason_phrase}")
                if response.status_code != 200:
                    raise FetchError(f"HTTP {response.status_code}: not a page")
                kind, charset = media_type(response.headers.get("content-type"))
                if kind and kind != "application/octet-stream":
                    self._check_type(kind)
                body = self._body(response)
                if not kind or kind == "application/octet-stream":
                    kind = sniffed(body)
                    self._check_type(kind)
                return Fetched(str(response.url), kind, charset, body,
                               response.headers.get("etag"),
                               response.headers.get("last-modified"))  # fmt: skip
        except Refused as exc:
            raise FetchError(f"refused: {exc}") from None
        except httpx.TooManyRedirects:
            raise FetchError(
                f"more than WEB_MAX_REDIRECTS={self.limits.max_redirects} redirects"
            ) from None
        except httpx.TimeoutException:
            raise FetchError(f"no answer within WEB_TIMEOUT={self.limits.timeout:g}s") from None
        except httpx.UnsupportedProtocol as exc:
            raise FetchError(f"redirected to a non-web address ({exc})") from None
        except httpx.HTTPError as exc:
            raise FetchError(f"cannot fetch it ({type(exc).__name__}: {exc})") from None

    def _check_type(self, kind: str) -> None:
        if kind not in self.limits.content_types:
            raise FetchError(f"content type {kind} is not one of WEB_CONTENT_TYPES")

    def _body(self, response: httpx.Response, cap: int | None = None) -> bytes:
        """The body, decoded, within `cap` bytes on the wire and `cap` decoded."""
        cap = cap or self.limits.max_bytes
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > cap:
            raise FetchError(f"{int(declared):,} bytes, more than WEB_MAX_BYTES={cap:,}")
        said = response.headers.get("content-encoding", "").lower().split(",")
        codings = [c.strip() for c in said if c.strip() not in ("", "identity")]
        if len(codings) > 1:
            raise FetchError(f"content encoded {len(codings)} times: refused (one at most)")
        if codings and codings[0] not in CODINGS:
            raise FetchError(f"content encoding {codings[0][:40]} is not gzip or deflate")
        wire = 0

        def raw() -> Iterator[bytes]:
            nonlocal wire
            for part in response.iter_raw(CHUNK):
                wire += len(part)
                if wire > cap:
                    raise FetchError(f"more than WEB_MAX_BYTES={cap:,} bytes")
                yield part

        parts: list[bytes] = []
        size = 0
        for part in inflate(raw(), codings[0]) if codings else raw():
            size += len(part)
            if size > cap:
                raise FetchError(f"more than WEB_MAX_BYTES={cap:,} bytes decoded")
            parts.append(part)
        return b"".join(parts)

    def _check_robots(self, url: httpx.URL) -> None:
        site = f"{url.scheme}://{url.netloc.decode('ascii')}"
        with self._lock:
            rules = self._robots.get(site)
        if rules is None:
            rules = self._read_robots(site)
            with self._lock:
                self._robots[site] = rules
        if isinstance(rules, str):
            raise FetchError(rules)
        if not rules.can_fetch(ROBOTS_AGENT, str(url)):
            raise FetchError(f"{site}/robots.txt disallows it (WEB_ROBOTS=false fetches it anyway)")

    def _read_robots(self, site: str) -> urllib.robotparser.RobotFileParser | str:
        """The site's robots.txt rules, or why none could be read (then nothing is fetched
        from the site this sync)."""
        rules = urllib.robotparser.RobotFileParser()
        try:
            with self.http.stream("GET", f"{site}/robots.txt") as response:
                status = response.status_code
                body = self._body(response, ROBOTS_MAX_BYTES) if status == 200 else b""
        except Refused as exc:
            return f"refused: {exc}"
        except (httpx.HTTPError, FetchError) as exc:
            return f"{site}/robots.txt could not be read ({exc}); tried next sync"
        if status >= 500:
            return f"{site}/robots.txt answered HTTP {status}; tried next sync"
        rules.parse(body.decode("utf-8", "replace").splitlines())
        return rules
