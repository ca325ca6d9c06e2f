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
