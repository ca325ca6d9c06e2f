"""Who may call the local Vertex endpoint and its Cloud Storage emulator, and how much of
them a caller may hold: the checks both servers make before they read a request's body.

A caller is let in when it is the endpoint's own user on this machine, or shows the
endpoint's token in an ``Authorization: Bearer`` header. The first needs no secret: for a
connection from loopback, the kernel's table of TCP sockets (``/proc/net/tcp``,
``/proc/net/tcp6``) has a row for the client's own socket, whose local address and port are
the peer address we see, and whose ``uid`` is the user that made it. So the SDK in the
user's notebook, the ``vertex`` backend and the user's scripts carry nothing a log, an
error message or a saved traceback could leak; the token is for a caller that cannot be
looked up so (the endpoint on ``--host`` for another machine), and never travels in a URL.

Limits: a request's body is read only once its caller is let in, and only up to a size
(413 above it; a Content-Length that is no number, or negative, is 400); each connection
has a socket timeout (an idle or half-sent one is closed, its thread freed); and the
connections served at once are capped, the owner's and everyone else's apart, so no other
user can take the owner's places.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
import socket
import struct
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ..exceptions import google_error_body

MAX_BODY = 64 * 1024 * 1024  # a CustomJob's request is kilobytes; 64 MiB is room for any the SDK sends
REQUEST_TIMEOUT = 60.0  # s a connection may sit idle, or stall within a request, before it is closed
OTHERS_TIMEOUT = 10.0  # ... for a caller not yet known to be the owner (it sends its headers at once)
MAX_OWNER_CONNECTIONS = 64  # served at once for the owner (the SDK keeps a few; a study's driver some)
MAX_OTHER_CONNECTIONS = 8  # ... for everyone else (token holders; the rest are refused at once)
TCP_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")
_ESTABLISHED = "01"


@dataclass(frozen=True)
class TcpSocket:
    """One row of ``/proc/net/tcp``: a socket of this network namespace."""

    local: tuple[str, int]
    remote: tuple[str, int]
    state: str  # the kernel's hex state; 01 is ESTABLISHED
    uid: int
    inode: int


def _address(field: str) -> tuple[str, int]:
    """``0100007F:1F90`` -> ("127.0.0.1", 8080): the address is the kernel's 32-bit words, each
    in this machine's byte order; the port is plain hex."""
    hex_ip, hex_port = field.split(":")
    words = [int(hex_ip[i:i + 8], 16) for i in range(0, len(hex_ip), 8)]
    raw = struct.pack(f"={len(words)}I", *words)
    ip = ipaddress.ip_address(raw)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # a dual-stack socket's IPv4 peer
    return str(ip), int(hex_port, 16)


def parse_tcp_table(text: str) -> list[TcpSocket]:
    """The rows of ``/proc/net/tcp`` or ``/proc/net/tcp6`` (the first line is the header)."""
    rows = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10:
            continue
        try:
            rows.append(TcpSocket(_address(fields[1]), _address(fields[2]), fields[3], int(fields[7]), int(fields[9])))
        except ValueError:
            continue
    return rows


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


def socket_owner(client: tuple[Any, ...], server: tuple[Any, ...]) -> int | None:
    """The uid that made the client's end of a loopback connection from ``client`` to
    ``server`` (both as ``getpeername``/``getsockname`` give them); None where the client is
    not on loopback or its socket is not in this namespace's table (gone already)."""
    if not is_loopback(client):
        return None
    peer, ours = _normal(client), _normal(server)
    for table in TCP_TABLES:
        try:
            with open(table) as f:
                rows = parse_tcp_table(f.read())
        except OSError:
            continue
        for row in rows:
            if row.local == peer and row.remote == ours and row.state == _ESTABLISHED:
                return row.uid
    return None


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


class GuardedHandler(BaseHTTPRequestHandler):
    """A request handler that knows its caller before any body: ``admit()`` answers a refusal
    itself and says False; ``body_length()`` is the body's size once it may be read (or None,
    answered: 400, 411, 413). A ``100 Continue`` is sent only to a caller let in."""

    server: GuardedServer
    protocol_version = "HTTP/1.1"
    max_body = MAX_BODY

    def setup(self) -> None:
        self.timeout = REQUEST_TIMEOUT if self.server.is_owner(self.request) else OTHERS_TIMEOUT
        super().setup()
        self._continue_asked = False

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

    def admit(self) -> bool:
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
