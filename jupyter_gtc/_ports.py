"""Free TCP ports on this machine."""

from __future__ import annotations

import random
import socket


def free_ports(count: int, host: str = "0.0.0.0") -> list[int]:
    """``count`` distinct TCP ports free right now (held open together so none repeats), taken
    below the kernel's ephemeral range. A port that ``bind(0)`` hands out comes from the range
    the kernel also gives every outgoing connection: released at once, it could be some
    connection's local port a moment later, and a slurmctld started on it failed with "Address
    already in use" (a full test run did). Another program may still take one before we bind
    it; callers that can retry should."""
    low = _ephemeral_low()
    socks: list[socket.socket] = []
    try:
        for _ in range(50 * count):
            if len(socks) == count:
                break
            s = socket.socket()
            try:
                s.bind((host, random.randrange(max(1024, low - 12000), low)))
            except OSError:  # in use (or TIME_WAIT): another
                s.close()
                continue
            socks.append(s)
        while len(socks) < count:  # a machine whose low ports are all taken: the kernel's choice
            s = socket.socket()
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (net.ipv4.ip_local_port_range)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return max(2048, int(f.read().split()[0]))
    except (OSError, ValueError, IndexError):
        return 32768


def listening(port: int) -> bool:
    """Whether a TCP socket of this network namespace listens on ``port`` (any address), read
    from the kernel's tables: no connection is made, so the daemon logs nothing."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f, None)
                for line in f:
                    fields = line.split()
                    # local_address is ADDR:PORT in hex; state 0A is LISTEN
                    if len(fields) > 3 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                        return True
        except (OSError, ValueError):
            continue
    return False
