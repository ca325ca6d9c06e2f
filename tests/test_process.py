"""The edge: every command is an argument list with a timeout, and failures carry data."""

import threading
import time

import psutil
import pytest

from jupyter_gtc import _process
from jupyter_gtc.exceptions import CommandError


def test_arguments_are_never_interpreted_by_a_shell():
    hostile = "a'; echo foo; $(id) `id` > /tmp/x"
    assert _process.run(["printf", "%s", hostile]).stdout == hostile


def test_failure_carries_argv_exit_code_and_stderr():
    with pytest.raises(CommandError) as info:
        _process.run(["ls", "/no/such/path"])
    err = info.value
    assert err.argv == ["ls", "/no/such/path"] and err.returncode == 2
    assert "No such file" in err.stderr and "ls exited with code 2" in str(err)


def test_timeout_is_an_error_not_a_hang():
    with pytest.raises(CommandError) as info:
        _process.run(["sleep", "5"], timeout=0.2)
    assert info.value.returncode is None and "timed out after 0.2s" in str(info.value)


def test_missing_program():
    with pytest.raises(CommandError) as info:
        _process.run(["no-such-program-gtc"])
    assert info.value.returncode == 127


def test_threads_reaping_the_same_exited_daemons_all_succeed(tmp_path):
    """A server deletes one cluster while its feed reads another's status: both reap the
    daemons this process started, at the same moment, and neither may fail."""
    pids = [_process.start_daemon(["true"], log_file=tmp_path / "log") for _ in range(200)]
    for pid in pids:  # exited (zombies until reaped), so every reaper finds all of them
        while not psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            time.sleep(0.01)
    start, errors = threading.Barrier(8), []

    def reap():
        start.wait()
        try:
            _process.reap_exited()
        except Exception as e:  # noqa: BLE001 - collected and asserted below
            errors.append(e)

    threads = [threading.Thread(target=reap) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() == psutil.STATUS_ZOMBIE for pid in pids)


def test_process_alive_with_and_without_a_start_time(tmp_path):
    """A cluster's owner is known by pid, host and start time; a study's driver by pid and
    host only. One check serves both: a pid reused by another process fools only the second."""
    me = _process.this_process()
    assert _process.process_alive(me)
    assert not _process.process_alive({**me, "boot_started": float(me["boot_started"]) - 60})  # its pid, reused
    assert _process.process_alive({"pid": me["pid"], "host": me["host"], "started": psutil.Process().create_time()})
    assert _process.process_alive({"pid": me["pid"], "host": me["host"]})
    pid = _process.start_daemon(["true"], log_file=tmp_path / "log")
    while psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        time.sleep(0.01)
    _process.reap_exited()
    assert not _process.process_alive({"pid": pid, "host": me["host"]})
    assert _process.process_alive({"pid": pid, "host": "another-host"})  # nothing here can tell


def test_a_command_a_thread_waits_for_ends_with_the_process(tmp_path):
    """A poller's squeue in a daemon thread, as its process exits: no command is left running
    without anyone to read it (a squeue of a deleted cluster's controller retries for a minute)."""
    import subprocess
    import sys

    import psutil

    marker = tmp_path / "marker"
    code = ("import sys, threading, time\nfrom jupyter_gtc import _process\n"
            f"threading.Thread(target=lambda: _process.run([sys.executable, '-c', 'import time; time.sleep(300)', {str(marker)!r}], timeout=600),"
            " daemon=True).start()\n"
            f"while not [p for p in __import__('psutil').process_iter(['cmdline']) if {str(marker)!r} in (p.info['cmdline'] or [])]:\n"
            "    time.sleep(0.05)\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    left = [p for p in psutil.process_iter(["cmdline"]) if str(marker) in (p.info["cmdline"] or [])]
    for p in left:
        p.wait(timeout=5)  # killed at exit: it may take a moment to be reaped
    assert not [p for p in left if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def test_a_daemon_that_outlives_us_starts_beside_its_log_not_in_the_users_folder(tmp_path, monkeypatch):
    """A cluster's slurmd started from a notebook's folder held that folder as its own, and a
    crashed slurmstepd left its core file there (twice in this repository's root)."""
    users_folder, cluster_folder = tmp_path / "notebooks", tmp_path / "cluster"
    users_folder.mkdir()
    cluster_folder.mkdir()
    monkeypatch.chdir(users_folder)
    log = cluster_folder / "daemon.log"
    pid = _process.start_daemon(["pwd"], log_file=log)
    psutil.Process(pid).wait(timeout=30)
    assert log.read_text() == f"{cluster_folder}\n"
