"""`gtc` as a separate, long-running process in a test, and never left behind.

A test that fails while `gtc job tensorboard` or `gtc job logs -f` runs must not leave the
process (nor what it started) running for the rest of the session: ``running_gtc`` kills
the whole tree on the way out, whatever happened in the block.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import psutil

# Started the way a background job starts a program: the shell sets SIGINT to ignored,
# then execs it, and the program inherits the disposition (`make test &`, CI without a tty).
_WITH_SIGINT_IGNORED = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                        "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])")


class Gtc(subprocess.Popen):
    """A running `gtc`; ``descendants`` are the processes it was seen to start."""

    descendants: list[psutil.Process]

    def note_descendants(self) -> list[psutil.Process]:
        """Record what the CLI has started so far (so they are killed too, even once orphaned)."""
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(self.pid).children(recursive=True):
                if child.pid not in {p.pid for p in self.descendants}:
                    self.descendants.append(child)
        return list(self.descendants)


@contextlib.contextmanager
def running_gtc(*argv: str, sigint_ignored: bool = False) -> Iterator[Gtc]:
    """``python -m jupyter_gtc.cli *argv`` with stdout piped; killed with its tree on exit."""
    command = [sys.executable, "-m", "jupyter_gtc.cli", *argv]
    if sigint_ignored:
        command = [sys.executable, "-c", _WITH_SIGINT_IGNORED, *command[1:]]
    proc = Gtc(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ)
    proc.descendants = []
    try:
        yield proc
    finally:
        left = proc.note_descendants() if proc.poll() is None else proc.descendants
        proc.kill()  # a no-op once it has exited
        for p in left:
            with contextlib.suppress(psutil.Error):  # gone already (psutil checks the pid was not reused)
                p.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
        wait_gone(left, timeout=30)


def alive(p: psutil.Process) -> bool:
    """Running, and not a zombie waiting for whoever reaps it."""
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def wait_gone(procs: list[psutil.Process], timeout: float = 60) -> list[psutil.Process]:
    """Wait until none of ``procs`` runs; returns those still running after ``timeout``."""
    deadline = time.monotonic() + timeout
    while (left := [p for p in procs if alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left
