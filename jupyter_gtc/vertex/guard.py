"""Who may call the local Vertex endpoint and its Cloud Storage emulator, and how much of
them a caller may hold: the checks both servers make before they read a request's body.

A caller is let in when it is the endpoint's own user on this machine, or shows the
endpoint's token in an ``Authorization: Bearer`` header. The first needs no secret: for a
client on this machine (over loopback or any address of it), the kernel's table of TCP
sockets (``/proc/net/tcp``, ``/proc/net/tcp6``) has a row for the client's own socket,
whose local address and port are the peer address we see, whose remote one is ours, and
whose ``uid`` is the user that made it; a client elsewhere (or in another network
namespace) has no row here. So the SDK in the user's notebook, the ``vertex`` backend and
the user's scripts carry nothing a log, an error message or a saved traceback could leak;
the token is for a caller that cannot be looked up so (another machine), and never travels
in a URL.

The user's web browser is such a caller too, and does what any page it shows asks. So a
request a browser makes is refused, whoever sends it: it carries ``Origin`` or a
``Sec-Fetch-*`` header (browsers add them; the SDK, ``requests`` and ``urllib`` never do), or
names in ``Host`` what is not the server's own address (a page's name made to resolve to
127.0.0.1: DNS rebinding).

Limits: a request's body is read only once its caller is let in, and only up to a size
(413 above it; a Content-Length that is no number, or negative, is 400); each connection
has a socket timeout (an idle or half-sent one is closed, its thread freed), and a caller
other than the owner a deadline for its request line and headers (one that trickles them
a byte at a time is closed there); and the connections served at once are capped, the
owner's and everyone else's apart, so no other user can take the owner's places.
"""

from __future__ import annotations

import hmac
import io
import ipaddress
import json
import os
import socket
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterable

from ..exceptions import google_error_body

MAX_BODY = 64 * 1024 * 1024  # a CustomJob's request is kilobytes; 64 MiB is room for any the SDK sends
REQUEST_TIMEOUT = 60.0  # s a connection may sit idle, or stall within a request, before it is closed
OTHERS_TIMEOUT = 10.0  # ... for a caller not yet known to be the owner (it sends its headers at once)
OTHERS_HEADERS_DEADLINE = 10.0  # s from a request's start to its last header, for all but the owner
MAX_OWNER_CONNECTIONS = 64  # served at once for the owner (the SDK keeps a few; a study's driver some)
MAX_OTHER_CONNECTIONS = 8  # ... for everyone else (token holders; the rest are refused at once)
TCP_TABLES = (("/proc/net/tcp", False), ("/proc/net/tcp6", True))  # (path, of IPv6 sockets)
_ESTABLISHED = "01"
# Headers only a web browser sends (on every request of the pages it shows, whatever their mode).
BROWSER_HEADERS = ("Origin", "Sec-Fetch-Site", "Sec-Fetch-Mode", "Sec-Fetch-Dest")
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


def _normal(address: tuple[Any, ...]) -> tuple[str, int]:
    ip = ipaddress.ip_address(address[0].split("%")[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return str(ip), int(address[1])


def is_loopback(address: tuple[Any, ...]) -> bool:
    if address[0] == "localhost":
        return True
    try:
        return ipaddress.ip_address(_normal(address)[0]).is_loopback
    except ValueError:
        return False


def table_field(address: tuple[str, int], v6: bool) -> str | None:
    """("127.0.0.1", 8080) as ``/proc/net/tcp`` writes it: ``0100007F:1F90``, the address as
    the kernel's 32-bit words, each in this machine's byte order, and the port in hex. In
    ``tcp6`` an IPv4 address is IPv4-mapped (a dual-stack socket's); None where the table
    cannot hold the address (an IPv6 one in ``tcp``)."""
    ip = ipaddress.ip_address(address[0])
    if isinstance(ip, ipaddress.IPv6Address) and not v6:
        return None
    raw = ip.packed if isinstance(ip, ipaddress.IPv6Address) or not v6 else b"\0" * 10 + b"\xff\xff" + ip.packed
    words = struct.unpack(f"={len(raw) // 4}I", raw)
    return "".join(f"{word:08X}" for word in words) + f":{address[1]:04X}"


def owner_in_table(lines: Iterable[str], client: tuple[str, int], server: tuple[str, int], v6: bool) -> int | None:
    """The uid of the established socket from ``client`` to ``server`` among the rows of
    ``/proc/net/tcp`` (``tcp6`` where ``v6``), compared as the kernel writes them and read no
    further than the match; None where there is none."""
    local, remote = table_field(client, v6), table_field(server, v6)
    if local is None or remote is None:
        return None
    for line in lines:
        fields = line.split(None, 8)  # sl local remote st queues timer retransmits uid ...
        if len(fields) > 7 and fields[1] == local and fields[2] == remote and fields[3] == _ESTABLISHED:
            return int(fields[7])
    return None


def socket_owner(client: tuple[Any, ...], server: tuple[Any, ...]) -> int | None:
    """The uid that made the client's end of a connection from ``client`` to ``server`` (both
    as ``getpeername``/``getsockname`` give them), over loopback or any other address; None
    where its socket is not in this network namespace's tables (another machine's, another
    namespace's, or gone already). The table of the client's address family first."""
    try:
        peer, ours = _normal(client), _normal(server)
    except ValueError:
        return None
    for table, v6 in TCP_TABLES:
        try:
            with open(table) as f:
                uid = owner_in_table(f, peer, ours, v6)
        except (OSError, ValueError):
            continue
        if uid is not None:
            return uid
    return None


def host_and_port(value: str) -> tuple[str, int] | None:
    """A ``Host`` header's name (lowercase; an IPv6 address without its brackets) and port
    (80 where none is given); None where it is no host and port."""
    value = value.strip().lower()
    if value.startswith("["):
        name, closed, rest = value[1:].partition("]")
        if not closed or (rest and not rest.startswith(":")):
            return None
        port = rest[1:]
    else:
        name, _, port = value.partition(":")
        if ":" in port:
            return None  # an IPv6 address is named in brackets
    port = port or "80"
    if not name or not (port.isascii() and port.isdigit()):
        return None
    return name, int(port)


def _host_name(host: str) -> str:
    """A host as ``Host`` headers are compared: lowercase, an address in its usual spelling."""
    host = host.strip().lower().removeprefix("[").removesuffix("]").split("%")[0]
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return host


def bearer(header: str | None) -> str | None:
    """The token of ``Authorization: Bearer TOKEN``."""
    scheme, _, value = (header or "").strip().partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


class GuardedServer(ThreadingHTTPServer):
    """A thread per connection, up to a cap (the owner's and others' apart; past it, 503 at
    once), each connection tagged with whether its caller is the owner (``uid``)."""

    daemon_threads = True
    block_on_close = False
    request_queue_size = 128  # a burst of connections is accepted (and answered 503 past the cap), not left in SYN retries
    what = "server"

    def __init__(self, address: tuple[str, int], handler: type, token: str | None, uid: int | None = None):
        self.token = token
        self.host = address[0]  # as given (--host): a name a Host header may use
        self.uid = os.getuid() if uid is None else uid
        self._slots = {True: threading.BoundedSemaphore(MAX_OWNER_CONNECTIONS),
                       False: threading.BoundedSemaphore(MAX_OTHER_CONNECTIONS)}
        self._owner_of: dict[int, bool] = {}
        self._owner_lock = threading.Lock()
        super().__init__(address, handler)

    def process_request(self, request: socket.socket, client_address: Any) -> None:
        try:
            owner = socket_owner(client_address, request.getsockname()) == self.uid
        except OSError:
            owner = False
        if not self._slots[owner].acquire(blocking=False):
            _refuse_busy(request, self.what)
            self.shutdown_request(request)
            return
        with self._owner_lock:
            self._owner_of[id(request)] = owner
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._release(request)
            raise

    def process_request_thread(self, request: socket.socket, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._release(request)

    def _release(self, request: socket.socket) -> None:
        with self._owner_lock:
            owner = self._owner_of.pop(id(request), None)
        if owner is not None:
            self._slots[owner].release()

    def is_owner(self, request: socket.socket) -> bool:
        with self._owner_lock:
            return self._owner_of.get(id(request), False)

    def authorized(self, request: socket.socket, authorization: str | None) -> bool:
        if self.is_owner(request):
            return True
        given = bearer(authorization)
        return bool(self.token and given and hmac.compare_digest(given.encode(), self.token.encode()))


def _refuse_busy(request: socket.socket, what: str) -> None:
    body = f'{{"error": {{"code": 503, "message": "the {what} serves as many connections as it may; ' \
           f'retry shortly", "status": "UNAVAILABLE"}}}}'.encode()
    head = (f"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            f"Connection: close\r\nRetry-After: 1\r\n\r\n").encode()
    try:
        request.settimeout(1)
        request.sendall(head + body)
    except OSError:
        pass


class _DeadlineReader(io.RawIOBase):
    """A connection's bytes, each read waiting no longer than ``timeout`` nor past
    ``deadline`` (``time.monotonic()``; None for none): a caller sending its headers a byte at
    a time, each long before a socket timeout, is closed at the deadline all the same."""

    def __init__(self, connection: socket.socket, timeout: float):
        self.connection, self.timeout = connection, timeout
        self.deadline: float | None = None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        wait = self.timeout
        if self.deadline is not None:
            wait = min(wait, self.deadline - time.monotonic())
            if wait <= 0:
                raise TimeoutError("the request line and headers were not all sent in time")
        self.connection.settimeout(wait)
        return self.connection.recv_into(buffer)


class GuardedHandler(BaseHTTPRequestHandler):
    """A request handler that knows its caller before any body: ``admit()`` answers a refusal
    itself and says False; ``body_length()`` is the body's size once it may be read (or None,
    answered: 400, 411, 413). A ``100 Continue`` is sent only to a caller let in."""

    server: GuardedServer
    protocol_version = "HTTP/1.1"
    max_body = MAX_BODY
    # An answer goes out as two writes (headers, then body): with Nagle's algorithm the second
    # waited for the client's delayed ACK, ~40 ms on every call of a kept-alive connection.
    disable_nagle_algorithm = True

    def setup(self) -> None:
        self.owner = self.server.is_owner(self.request)
        self.timeout = REQUEST_TIMEOUT if self.owner else OTHERS_TIMEOUT
        super().setup()
        self.rfile.close()  # read through the deadline instead
        self._reader = _DeadlineReader(self.connection, self.timeout)
        self.rfile = io.BufferedReader(self._reader)
        self._continue_asked = False

    def handle_one_request(self) -> None:
        if not self.owner:  # idle time before the request counts: the place it holds is one of 8
            self._reader.deadline = time.monotonic() + OTHERS_HEADERS_DEADLINE
        super().handle_one_request()

    def parse_request(self) -> bool:
        try:
            return super().parse_request()  # reads the headers
        finally:
            self._reader.deadline = None
            self.connection.settimeout(self.timeout)  # the answer is written with the plain timeout

    def handle_expect_100(self) -> bool:
        self._continue_asked = True  # sent by body_length(), after the caller is known
        return True

    def refuse(self, code: int, status: str, message: str) -> None:
        """Answer Google's error and close the connection (its body, if any, is never read)."""
        data = json.dumps(google_error_body(code, status, message)).encode()
        self.close_connection = True
        self.send_response(code)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)
        self.refused(code)

    def refused(self, code: int) -> None:
        """Called after each refusal (the endpoint logs it)."""

    def not_a_programs_request(self) -> str | None:
        """Why this request is one a web browser made (for a page, whoever the page's site is)
        rather than a program's, or None."""
        for name in BROWSER_HEADERS:
            if name in self.headers:
                return (f"a request with a {name} header comes from a web browser, and this local "
                        f"{self.server.what} serves programs only (the SDK, scripts): a web page the browser "
                        f"shows could otherwise use it as you")
        port = self.server.server_address[1]
        names = {*LOOPBACK_NAMES, _host_name(self.server.host), _host_name(self.connection.getsockname()[0])}
        names = {name for name in names if name not in ("0.0.0.0", "::", "")}
        given = self.headers.get("Host")
        named = host_and_port(given or "")
        if named is None or named[1] != port or _host_name(named[0]) not in names:
            served = ", ".join(f"[{n}]:{port}" if ":" in n else f"{n}:{port}" for n in sorted(names))
            return (f"Host {given!r} is not this {self.server.what}'s address ({served}): it answers requests "
                    f"made to its address only, never to another name that leads here (a web page's, made "
                    f"to resolve to this machine)")
        return None

    def admit(self) -> bool:
        why = self.not_a_programs_request()
        if why:
            self.refuse(403, "PERMISSION_DENIED", why)
            return False
        if self.server.authorized(self.request, self.headers.get("Authorization")):
            return True
        if self.headers.get("Authorization"):
            self.refuse(401, "UNAUTHENTICATED", "the token given is not this endpoint's")
        else:
            self.refuse(403, "PERMISSION_DENIED",
                        f"this local {self.server.what} serves its own user (uid {self.server.uid}) on this "
                        f"machine; anyone else must give its token in an Authorization: Bearer header")
        return False

    def body_length(self) -> int | None:
        text = self.headers.get("Content-Length")
        if text is None:
            if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                self.refuse(411, "INVALID_ARGUMENT", "Content-Length is required (a chunked body is not taken)")
                return None
            return 0
        try:
            length = int(text.strip())
        except ValueError:
            length = -1
        if length < 0 or not text.strip().isdigit():
            self.refuse(400, "INVALID_ARGUMENT", f"Content-Length {text!r} is not a size: a whole number of "
                                                 f"bytes, 0 or more")
            return None
        if length > self.max_body:
            self.refuse(413, "INVALID_ARGUMENT", f"a body of {length} bytes is more than this {self.server.what} "
                                                 f"takes ({self.max_body} bytes at most)")
            return None
        if self._continue_asked and length:
            self.send_response_only(100)
            self.end_headers()
        self._continue_asked = False  # asked anew by the connection's next request, if at all
        return length
