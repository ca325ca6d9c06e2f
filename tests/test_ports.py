"""Ports the product picks for its daemons come from below the kernel's ephemeral range: one
that bind(0) handed out could be an outgoing connection's local port a moment after it was
released, and a slurmctld started there failed ("Address already in use", seen in a full run)."""

import socket

from jupyter_gtc._ports import _ephemeral_low, free_ports


def test_ports_are_distinct_free_and_below_the_ephemeral_range():
    low = _ephemeral_low()
    held = socket.socket()
    held.bind(("0.0.0.0", free_ports(1)[0]))  # one taken: never handed out while it is
    try:
        for _ in range(20):
            ports = free_ports(8)
            assert len(set(ports)) == 8 and all(1024 <= p < low for p in ports), ports
            assert held.getsockname()[1] not in ports
    finally:
        held.close()
