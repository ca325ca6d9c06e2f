"""A delete stops a cluster's supervisor with its SIGTERM, whatever signal mask the thread
that created the cluster had: daemons start with nothing blocked, and the supervisor unblocks
SIGTERM itself. Made from a thread that blocked SIGTERM, the supervisor and munged once
ignored the stop's SIGTERM until its grace ran out and SIGKILL came: 9.4 s to delete against
2.3 s (bench/delete_speed.py measures it; no timing is asserted here)."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import psutil
import pytest

from jupyter_gtc import api
from jupyter_gtc.backends import daemons, supervisor
from tests.backends.test_local import daemons_of
from tests.conftest import small_gpu_spec

pytestmark = pytest.mark.slurm


def blocked_signals(pid: int) -> set[int]:
    """The signals ``pid`` blocks (its SigBlk mask)."""
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    mask = int(status["SigBlk"].strip(), 16)
    return {n for n in range(1, 65) if mask & (1 << (n - 1))}


def test_a_cluster_made_by_a_thread_blocking_sigterm_stops_its_supervisor_on_delete(slurm_available):
    errors = []

    def create() -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        try:
            api.create_cluster(small_gpu_spec("blocked", nodes=1, supervisor=True))
        except Exception as e:  # noqa: BLE001 - reported by the test's thread
            errors.append(e)

    thread = threading.Thread(target=create)
    thread.start()
    thread.join()
    assert not errors, errors
    run = Path(api.get_cluster("blocked").runtime["dir"]) / "run"
    try:
        wrapper = daemons.find(supervisor.LABEL, run)
        assert wrapper is not None
        processes = [wrapper, *wrapper.children(recursive=True)]
        munged = daemons.find("munged", run)
        # The daemons themselves (their wrappers: unshare blocks SIGTERM while it waits, by design).
        ends = [p for p in [*processes, *munged.children(recursive=True)] if p.name() in ("python", "munged")
                or p.name().startswith("python3")]
        assert {p.name() for p in ends} >= {"munged"} and len(ends) >= 2, ends
        for proc in ends:
            assert signal.SIGTERM not in blocked_signals(proc.pid), f"{proc.name()} ({proc.pid}) blocks SIGTERM"
    finally:
        api.delete_cluster("blocked")
    # Gone when delete returns, and nothing of the cluster's is left running.
    for proc in processes:
        assert not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE, proc
    assert daemons_of(run) == []
