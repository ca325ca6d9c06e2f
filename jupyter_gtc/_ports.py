"""Free TCP ports on this machine."""

from __future__ import annotations

import socket


def free_ports(count: int, host: str = "0.0.0.0") -> list[int]:
    """``count`` distinct TCP ports free right now (held open together so none repeats).
    Another program may still take one before we bind it; callers that can retry should."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


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
