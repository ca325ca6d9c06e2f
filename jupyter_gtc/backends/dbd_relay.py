"""A cluster's accounting relay: the port slurm.conf names for slurmdbd, forwarding each
connection to the cluster's slurmdbd, so that slurmctld's messages to slurmdbd (and sacct's,
sacctmgr's) are not delayed 40 ms each way.

Slurm 22.05 sends every message in two writes, its length then its body
(slurm_msg_sendto_timeout), and never sets TCP_NODELAY on its sockets. Over loopback the
body then waits for the receiver to acknowledge the length, which Linux delays up to 40 ms
(delayed ACK against Nagle): a request and its reply took ~90 ms however small, and
slurmctld's start, which loads TRES, QOS, associations, users and federations from slurmdbd
one message at a time, took about a second. No Slurm setting turns that off, and the other
ways (a route's ``quickack``, sysctls) change the machine's network. This relay acknowledges
at once what it receives (TCP_QUICKACK, set again after every read) and sends with
TCP_NODELAY, on both sides: each message then crosses in well under a millisecond.

It forwards bytes and knows nothing of Slurm's protocol: munge signs every message end to end,
and it listens on the address slurmdbd listens on. Run as a file, not a module of the package
(its Python starts in 20 ms, not 160), by accounting.start:

    python dbd_relay.py LISTEN_ADDR LISTEN_PORT SLURMDBD_ADDR SLURMDBD_PORT
"""

from __future__ import annotations

import socket
import sys
import threading

CONNECT_TIMEOUT = 5.0


def _pump(src: socket.socket, dst: socket.socket, done: threading.Semaphore) -> None:
    """Copy ``src`` to ``dst`` until ``src`` ends, then end ``dst``'s writing half (the other
    direction may still carry a reply)."""
    try:
        while data := src.recv(65536):
            src.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)  # the kernel clears it
            dst.sendall(data)
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        for s in (src, dst):  # one side failed: end both directions
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
    finally:
        done.release()


def _serve(client: socket.socket, target: tuple[str, int], source: str) -> None:
    try:
        upstream = socket.create_connection(target, timeout=CONNECT_TIMEOUT, source_address=(source, 0))
    except OSError:
        client.close()  # as slurmdbd being down looks: the connection fails
        return
    upstream.settimeout(None)
    for s in (client, upstream):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
    done = threading.Semaphore(0)
    threading.Thread(target=_pump, args=(upstream, client, done), daemon=True).start()
    _pump(client, upstream, done)
    done.acquire()
    done.acquire()
    client.close()
    upstream.close()


def main(argv: list[str]) -> int:
    listen_addr, listen_port, target_addr, target_port = argv[0], int(argv[1]), argv[2], int(argv[3])
    server = socket.create_server((listen_addr, listen_port), backlog=64)
    while True:
        client, _ = server.accept()
        # From the address it listens on: slurmdbd records slurmctld's address as the one its
        # connection comes from, and sends slurmctld updates (sacctmgr's changes) there.
        threading.Thread(target=_serve, args=(client, (target_addr, target_port), listen_addr), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
