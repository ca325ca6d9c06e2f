"""How the local Vertex endpoint knows its own user's calls: the kernel's TCP table parsed
(a pure function, on rows as the kernel writes them) and looked up for a real connection,
over loopback or over any other address of this machine; and how it reads a request's Host."""

from __future__ import annotations

import os
import socket

import pytest

from jupyter_gtc.vertex.guard import bearer, host_and_port, is_loopback, owner_in_table, socket_owner, table_field

TABLE = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:07E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1079 1 0 100 0 0 10 0
   1: 0100007F:D519 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1001        0 4242 1 0 20 4 30 10 -1
"""
TABLE6 = """  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0000000000000000FFFF00000100007F:C350 0000000000000000FFFF00000100007F:1F90 01 00000000:00000000 00:00000000 00000000  1002        0 77 1 0 20 4 30 10 -1
   1: 00000000000000000000000001000000:C351 00000000000000000000000001000000:1F90 01 00000000:00000000 00:00000000 00000000  1003        0 78 1 0 20 4 30 10 -1
"""


def test_rows_are_read_as_the_kernel_writes_them():
    lines = TABLE.splitlines()
    assert owner_in_table(lines, ("127.0.0.1", 54553), ("127.0.0.1", 8080), v6=False) == 1001
    assert owner_in_table(lines, ("0.0.0.0", 2024), ("0.0.0.0", 0), v6=False) is None  # listening, not a connection
    assert owner_in_table(lines, ("127.0.0.1", 54554), ("127.0.0.1", 8080), v6=False) is None
    assert owner_in_table(lines, ("::1", 50001), ("::1", 8080), v6=False) is None  # IPv6: never in tcp
    lines6 = TABLE6.splitlines()
    assert owner_in_table(lines6, ("127.0.0.1", 50000), ("127.0.0.1", 8080), v6=True) == 1002  # a dual-stack socket
    assert owner_in_table(lines6, ("::1", 50001), ("::1", 8080), v6=True) == 1003
    assert table_field(("127.0.0.1", 8080), v6=False) == "0100007F:1F90"


def test_a_loopback_connection_is_this_users_and_no_other_socket_is():
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        accepted, peer = server.accept()
        with client, accepted:
            assert socket_owner(peer, accepted.getsockname()) == os.getuid()
            assert socket_owner(("127.0.0.1", 1), accepted.getsockname()) is None  # no such socket
    assert socket_owner(("192.0.2.1", 5000), ("192.0.2.2", 80)) is None  # another machine's: no row here
    assert is_loopback(("::1", 0, 0, 0)) and is_loopback(("::ffff:127.0.0.1", 1)) and not is_loopback(("10.0.0.1", 1))


def test_only_a_bearer_header_carries_a_token():
    assert bearer("Bearer abc") == "abc" and bearer("bearer  abc ") == "abc"
    assert bearer("Basic abc") is None and bearer("Bearer ") is None and bearer(None) is None


def address_beyond_loopback() -> str | None:
    """An IPv4 address of this machine that is not loopback (the one its default route leaves
    from, else any of an interface that is up), or None where it has none."""
    import ipaddress

    import psutil

    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("192.0.2.1", 9))  # a UDP "connection" sends nothing: it only picks the route
            address = probe.getsockname()[0]
        if not ipaddress.ip_address(address).is_loopback:
            return address
    except OSError:
        pass
    up = {name for name, stats in psutil.net_if_stats().items() if stats.isup}
    for name, addresses in psutil.net_if_addrs().items():
        for a in addresses:
            if name in up and a.family == socket.AF_INET:
                ip = ipaddress.ip_address(a.address)
                if not (ip.is_loopback or ip.is_link_local or ip.is_unspecified):
                    return a.address
    return None


def test_a_connection_to_an_address_beyond_loopback_is_known_as_this_users_too():
    address = address_beyond_loopback()
    if address is None:
        pytest.skip("this machine has no address beyond loopback to connect to")
    with socket.create_server((address, 0)) as server:
        client = socket.create_connection(server.getsockname())
        accepted, peer = server.accept()
        with client, accepted:
            assert peer[0] == address  # a client on this machine, through no loopback
            assert socket_owner(peer, accepted.getsockname()) == os.getuid()


def test_the_host_a_request_names_is_read_as_name_and_port():
    assert host_and_port("127.0.0.1:8480") == ("127.0.0.1", 8480)
    assert host_and_port("LocalHost:8480") == ("localhost", 8480)
    assert host_and_port("[::1]:8480") == ("::1", 8480) and host_and_port("[::1]") == ("::1", 80)
    assert host_and_port("evil.example") == ("evil.example", 80)
    for bad in ("::1:8480", "[::1", "[::1]x", "h:port", "h:８０", "h:-1", ""):
        assert host_and_port(bad) is None, bad
