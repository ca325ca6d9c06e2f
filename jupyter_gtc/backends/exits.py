"""Wake a sleeping loop the moment a watched process exits, not at its next look: a pidfd per
process (Linux 5.3+, ``pidfd_open(2)``), polled with the loop's sleep as the timeout. The
supervisor watches each node's slurmd with it, so a crash is acted on within milliseconds
instead of up to a tick later (half a second on average, at once on every node's fault).

A pidfd names one process, never a later one given the same pid: it is opened on a pid
``psutil`` has just vouched for, and checked again after opening (``is_running`` compares
the start time), so a process that ended in between is not watched in its successor's place.
"""

from __future__ import annotations

import os
import select

import psutil


class Exits:
    def __init__(self) -> None:
        self._watched: dict[str, tuple[int, int]] = {}  # key -> (pid, pidfd)
        self._poll = select.poll()

    def watch(self, key: str, proc: psutil.Process | None) -> None:
        """Watch ``proc`` under ``key`` (in place of what ``key`` watched); None: nothing."""
        held = self._watched.get(key)
        if held is not None and proc is not None and held[0] == proc.pid:
            return
        self.forget(key)
        if proc is None:
            return
        try:
            fd = os.pidfd_open(proc.pid)
        except OSError:  # gone already (ESRCH), or no pidfds here: the next look sees it
            return
        if not proc.is_running():
            os.close(fd)
            return
        self._watched[key] = (proc.pid, fd)
        self._poll.register(fd, select.POLLIN)

    def forget(self, key: str) -> None:
        held = self._watched.pop(key, None)
        if held is not None:
            self._poll.unregister(held[1])
            os.close(held[1])

    def wait(self, timeout: float) -> list[str]:
        """Sleep up to ``timeout`` seconds, less if a watched process exits: the keys of those
        that did (no longer watched: a key is watched again once its new process is given)."""
        ready = {fd for fd, _ in self._poll.poll(max(0.0, timeout) * 1000)}
        fired = [key for key, (_, fd) in self._watched.items() if fd in ready]
        for key in fired:
            self.forget(key)
        return fired

    def close(self) -> None:
        for key in list(self._watched):
            self.forget(key)
