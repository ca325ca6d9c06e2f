"""How the local Vertex endpoint knows its own user's calls: the kernel's TCP table parsed
(a pure function, on rows as the kernel writes them) and looked up for a real connection."""

from __future__ import annotations

import os
import socket

from jupyter_gtc.vertex.guard import bearer, is_loopback, parse_tcp_table, socket_owner

TABLE = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:07E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1079 1 0 100 0 0 10 0
   1: 0100007F:D519 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1001        0 4242 1 0 20 4 30 10 -1
"""
TABLE6 = """  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0000000000000000FFFF00000100007F:C350 0000000000000000FFFF00000100007F:1F90 01 00000000:00000000 00:00000000 00000000  1002        0 77 1 0 20 4 30 10 -1
   1: 00000000000000000000000001000000:C351 00000000000000000000000001000000:1F90 01 00000000:00000000 00:00000000 00000000  1003        0 78 1 0 20 4 30 10 -1
"""


def test_rows_are_read_as_the_kernel_writes_them():
    listening, client = parse_tcp_table(TABLE)
    assert (listening.local, listening.state, listening.uid) == (("0.0.0.0", 2024), "0A", 0)
    assert (client.local, client.remote, client.state, client.uid, client.inode) == (
        ("127.0.0.1", 54553), ("127.0.0.1", 8080), "01", 1001, 4242)
    mapped, v6 = parse_tcp_table(TABLE6)
    assert (mapped.local, mapped.uid) == (("127.0.0.1", 50000), 1002)  # a dual-stack socket's IPv4 peer
    assert (v6.local, v6.remote, v6.uid) == (("::1", 50001), ("::1", 8080), 1003)


def test_a_loopback_connection_is_this_users_and_others_are_not_looked_up():
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        accepted, peer = server.accept()
        with client, accepted:
            assert socket_owner(peer, accepted.getsockname()) == os.getuid()
            assert socket_owner(("127.0.0.1", 1), accepted.getsockname()) is None  # no such socket
    assert socket_owner(("192.0.2.1", 5000), ("192.0.2.2", 80)) is None  # not loopback: never looked up
    assert is_loopback(("::1", 0, 0, 0)) and is_loopback(("::ffff:127.0.0.1", 1)) and not is_loopback(("10.0.0.1", 1))


def test_only_a_bearer_header_carries_a_token():
    assert bearer("Bearer abc") == "abc" and bearer("bearer  abc ") == "abc"
    assert bearer("Basic abc") is None and bearer("Bearer ") is None and bearer(None) is None
