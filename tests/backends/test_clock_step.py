"""A daemon is told from a later process given its pid by when it started. Taken from the wall
clock (psutil's create_time: boot time + seconds since boot), that moved whenever the system
clock was set (NTP, a VM resumed): every live daemon then looked gone. A 10-minute bench saw it:
the clock stepped, the supervisor took a live slurmd for crashed, and the reimage that followed
killed every daemon no record held any more (stop_unrecorded), the supervisor among them, which
stopped itself first (SIGSTOP) and left the whole cluster frozen. Seconds since boot do not move."""

from __future__ import annotations

import os

import psutil

from jupyter_gtc import _process
from jupyter_gtc.backends import daemons


def set_clock_forward(monkeypatch, seconds: float) -> None:
    """The system clock set ``seconds`` forward, as psutil sees it: its boot time is the wall
    clock's now minus the uptime, so it moves with the clock (what a step does to every reader)."""
    from psutil import _pslinux

    booted = psutil.boot_time() + seconds
    monkeypatch.setattr(_pslinux, "boot_time", lambda: booted)
    monkeypatch.setattr(psutil, "boot_time", lambda: booted)


def test_a_running_daemon_is_still_found_after_the_clock_is_set(tmp_path, monkeypatch):
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    pid = daemons.start("sleeper", ["sleep", "600"], run, tmp_path / "sleeper.log", dict(os.environ), plain=True)
    me = _process.this_process()
    try:
        set_clock_forward(monkeypatch, 15.0)
        assert daemons.find("sleeper", run) is not None
        assert daemons.stop_unrecorded(run) == []  # a live daemon its record holds is not killed
        assert psutil.Process(pid).status() not in (psutil.STATUS_STOPPED, psutil.STATUS_ZOMBIE)
        assert _process.process_alive(me)  # this very process, as a lock records its owner
    finally:
        daemons.stop("sleeper", run)
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_a_later_process_with_a_reused_pid_is_not_the_recorded_one():
    recorded = {"pid": os.getpid(), "boot_started": _process.started_since_boot(os.getpid()) - 1.0}
    assert not _process.same_start(os.getpid(), recorded)
    assert _process.same_start(os.getpid(), {**recorded, "boot_started": _process.started_since_boot(os.getpid())})
