"""A real TensorBoard on a job's log dir: one per log dir per process, on a free port,
stopped when the process exits (or on request), and ending by itself if this process is
killed without a chance to stop it. A log dir on another host (an attached cluster's login
node) is mirrored here first (``mirror.py``), and TensorBoard reads the mirror."""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import psutil

from .. import _process
from .._ports import free_ports
from ..exceptions import GtcError
from ..hosts import LOCAL, Host
from .mirror import Mirror

_running: dict[Path, "TensorBoard"] = {}
_lock = threading.Lock()

# What the TensorBoard process runs: ``python -m tensorboard.main`` after two safeguards.
# Ctrl-C ends it again even when it inherited SIGINT ignored (its parent runs in a background
# job; for SIGTERM, TensorBoard sets a handler of its own). And it ends when its parent is
# gone: a kernel or `gtc job tensorboard` killed outright (SIGKILL, a hang-up) runs no
# clean-up, and the orphaned TensorBoard used to run on with nobody left to stop it.
_LAUNCHER = """\
import os, runpy, signal, sys, threading, time
signal.signal(signal.SIGINT, signal.default_int_handler)
parent = int(sys.argv.pop(1))
def end_with_parent():
    while os.getppid() == parent:
        time.sleep(1)
    os.kill(os.getpid(), signal.SIGTERM)
threading.Thread(target=end_with_parent, name="end-with-parent", daemon=True).start()
sys.argv[0] = "tensorboard"
runpy.run_module("tensorboard.main", run_name="__main__", alter_sys=True)
"""


@dataclass
class TensorBoard:
    log_dir: Path
    port: int
    pid: int
    host: str = "127.0.0.1"
    mirror: Mirror | None = None  # the local copy it reads, for a log dir on a cluster's host

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/"

    @property
    def running(self) -> bool:
        _process.reap_exited()
        try:
            return psutil.Process(self.pid).status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    def stop(self) -> None:
        if self.mirror is not None:
            self.mirror.stop()
        try:
            proc = psutil.Process(self.pid)
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=10)
        except psutil.TimeoutExpired:
            proc.kill()
        except psutil.Error:
            pass
        _process.reap_exited()
        with _lock:
            if _running.get(self.log_dir) is self:
                del _running[self.log_dir]

    def _repr_html_(self) -> str:
        return f'<a href="{self.url}" target="_blank">TensorBoard for {self.log_dir}</a> (pid {self.pid})'


def start(log_dir: Path, timeout: float = 90, host: Host = LOCAL, mirror_dir: Path | None = None) -> TensorBoard:
    """TensorBoard for ``log_dir``: the one this process started already, or a new one once
    it answers HTTP. It is stopped when this process exits, and ends by itself if this
    process is killed outright (a kernel restarted, SIGKILL). A ``log_dir`` on another
    ``host`` is mirrored into ``mirror_dir`` (kept up to date while TensorBoard runs)."""
    log_dir = Path(log_dir)
    with _lock:
        existing = _running.get(log_dir)
        if existing and existing.running:
            return existing
        mirror = None
        if host is not LOCAL:
            if mirror_dir is None:
                raise GtcError(f"{log_dir} is on {host.name}: give a local folder to mirror it into")
            mirror = Mirror(host, log_dir, mirror_dir / "logs").start()
        read_dir = mirror.local if mirror else log_dir
        port = free_ports(1, "127.0.0.1")[0]
        out = read_dir.parent / "tensorboard.out"
        pid = _process.start_daemon(
            [sys.executable, "-c", _LAUNCHER, str(os.getpid()), "--logdir", str(read_dir), "--host", "127.0.0.1",
             "--port", str(port), "--reload_interval", "2"], log_file=out, detach=False)
        board = _running[log_dir] = TensorBoard(log_dir, port, pid, mirror=mirror)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not board.running:
            raise GtcError(f"TensorBoard exited: {out.read_text(errors='replace')[-500:]}")
        try:
            with urllib.request.urlopen(board.url, timeout=2):
                return board
        except OSError:
            time.sleep(0.3)
    board.stop()
    raise GtcError(f"TensorBoard did not answer on {board.url} within {timeout:.0f} s; see {out}")


@atexit.register
def _stop_all() -> None:
    for board in list(_running.values()):
        board.stop()
