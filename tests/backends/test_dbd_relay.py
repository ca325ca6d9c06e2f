"""The accounting relay (backends/dbd_relay.py) between slurmctld (and sacct) and slurmdbd:
bytes both ways, as Slurm writes them (a length, then a body, in two writes), a reply after
the request's sender stopped writing, and a connection refused where slurmdbd is down. Real
sockets on loopback; the relay runs as accounting.start runs it, a Python of its own."""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
import threading
import time

import pytest

from jupyter_gtc._ports import free_ports, listening
from jupyter_gtc.backends.accounting import RELAY


@pytest.fixture
def relay():
    """(start, listen port): start(target_port) runs a relay to 127.0.0.1:target_port."""
    port = free_ports(1, "127.0.0.1")[0]
    procs = []

    def start(target: int) -> int:
        procs.append(subprocess.Popen([sys.executable, "-I", str(RELAY), "127.0.0.1", str(port), "127.0.0.1",
                                       str(target)]))
        deadline = time.monotonic() + 10
        while not listening(port):
            assert procs[-1].poll() is None and time.monotonic() < deadline, "the relay did not listen"
            time.sleep(0.01)
        return port

    yield start
    for p in procs:
        p.terminate()
        p.wait(timeout=10)


def _slurm_like_server(srv: socket.socket, replies: int) -> None:
    """Answers each message (4-byte length, then body, sent as two writes as Slurm does) with
    its body reversed, the same way; after the client stops writing, one last message."""
    conn, _ = srv.accept()
    with conn:
        f = conn.makefile("rb")
        for _ in range(replies):
            (size,) = struct.unpack("!I", f.read(4))
            body = f.read(size)
            conn.sendall(struct.pack("!I", len(body)))
            conn.sendall(body[::-1])
        assert f.read() == b""  # the client's half-close reached us
        conn.sendall(struct.pack("!I", 3))
        conn.sendall(b"bye")


def test_messages_cross_both_ways_and_a_reply_still_arrives_after_the_client_stops_writing(relay):
    srv = socket.create_server(("127.0.0.1", 0))
    server = threading.Thread(target=_slurm_like_server, args=(srv, 20), daemon=True)
    server.start()
    port = relay(srv.getsockname()[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
        f = c.makefile("rb")
        for i in range(20):
            body = f"message {i} ".encode() * (1 + i * 500)  # up to ~100 KB: several reads
            c.sendall(struct.pack("!I", len(body)))
            c.sendall(body)
            (size,) = struct.unpack("!I", f.read(4))
            assert f.read(size) == body[::-1]
        c.shutdown(socket.SHUT_WR)
        assert f.read() == struct.pack("!I", 3) + b"bye"  # then the relay ends our side too
    server.join(10)
    srv.close()


def test_where_slurmdbd_is_down_the_relay_closes_the_connection_and_keeps_serving(relay):
    down = free_ports(1, "127.0.0.1")[0]  # nothing listens there
    port = relay(down)
    for _ in range(2):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
            c.settimeout(10)
            try:
                assert c.recv(1) == b""  # closed, as slurmdbd being down looks to slurmctld
            except ConnectionResetError:
                pass
