"""How fast the supervisor notices a fault. A crashed slurmd wakes it at once: it sleeps between
looks on every slurmd's pidfd (issue 29: the crash waited for the next look, half a second on
average). A partitioned node is cut off fast: the supervisor looks once a second, but once a node's
probe goes unanswered the next look follows at once, so its three unanswered probes (half a
second each) cover 1.5 s without gaps (issue 29: they were spread over five seconds, a second's
sleep after each one-second timeout, then over three)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from jupyter_gtc import api
from jupyter_gtc.backends.supervisor import PROBE_TIMEOUT_S, SILENT_PROBES, Supervisor
from tests.conftest import sleep_until, small_gpu_spec
from tests.non_root import needs_root

pytestmark = pytest.mark.usefixtures("slurm_available")


@needs_root
def test_a_silent_nodes_probes_follow_each_other_without_sleep_between(monkeypatch):
    # No supervisor process of its own: this test's, in a thread, is the only one looking.
    cluster = api.create_cluster(small_gpu_spec("silent", nodes=2, supervisor=False, network="namespaces"))
    try:
        watcher = Supervisor(Path(os.environ["GTC_HOME"]), cluster.name)
        cut = cluster.nodes[0].name
        seen: list[tuple] = []  # the loop's own probes of ``cut`` and waits, in order
        real_answers, real_wait = watcher.backend.node_answers, watcher.exits.wait

        def answers(runtime, node, *args, **kwargs):  # the real probe, its seconds noted
            began = time.monotonic()
            answered = real_answers(runtime, node, *args, **kwargs)
            if node == cut:
                seen.append(("probe", time.monotonic() - began, answered))
            return answered

        def wait(seconds: float) -> list[str]:  # the loop's sleep between looks, noted
            seen.append(("wait", seconds))
            return real_wait(seconds)

        monkeypatch.setattr(watcher.backend, "node_answers", answers)
        monkeypatch.setattr(watcher.exits, "wait", wait)
        loop = threading.Thread(target=watcher.loop, daemon=True)
        loop.start()
        assert sleep_until(lambda: any(e == ("probe", e[1], True) for e in seen), 60), seen
        api.inject_fault(cluster.name, cut, "partition")

        def cut_off() -> bool:
            return any(e["node"] == cut and e["event"] == "unreachable" for e in api.cluster_events(cluster.name))

        assert sleep_until(cut_off, 60), seen
        events = api.cluster_events(cluster.name)
    finally:
        api.delete_cluster(cluster.name)  # the loop ends with its cluster
    loop.join(60)
    assert not loop.is_alive()
    first = next(i for i, e in enumerate(seen) if e[0] == "probe" and not e[2])
    silent = [i for i, e in enumerate(seen) if i >= first and e[0] == "probe"][:SILENT_PROBES]
    assert [seen[i][2] for i in silent] == [False] * SILENT_PROBES, seen
    # Between the silent probes the loop does not wait at all: the next look follows at once.
    assert not [e for e in seen[silent[0]:silent[-1]] if e[0] == "wait"], seen
    detail = next(e["detail"] for e in events if e["node"] == cut and e["event"] == "unreachable")
    assert f"not answered for {SILENT_PROBES * PROBE_TIMEOUT_S:g} s" in detail


def test_a_crashed_slurmd_wakes_the_supervisor_however_long_it_would_sleep(monkeypatch):
    cluster = api.create_cluster(small_gpu_spec("woken", nodes=2, supervisor=False))
    try:
        watcher = Supervisor(Path(os.environ["GTC_HOME"]), cluster.name)
        crashed = cluster.nodes[0].name
        asleep, woken = threading.Event(), []
        real_wait = watcher.exits.wait

        def wait(seconds: float) -> list[str]:  # a look every ten minutes until the crash woke it
            asleep.set()
            fired = real_wait(seconds if woken else 600)
            woken.append(fired)
            return fired

        monkeypatch.setattr(watcher.exits, "wait", wait)
        loop = threading.Thread(target=watcher.loop, daemon=True)
        loop.start()
        assert asleep.wait(60)  # its first look done: every node's slurmd watched
        api.inject_fault(cluster.name, crashed, "crash")

        def set_down() -> bool:
            return any(e["node"] == crashed and e["event"] == "down" for e in api.cluster_events(cluster.name))

        assert sleep_until(set_down, 120), woken
        assert woken[0] == [crashed]  # the sleep it was in ended with the crash, not its ten minutes
    finally:
        api.delete_cluster(cluster.name)  # the loop, looking once a second again, ends with its cluster
    loop.join(60)
    assert not loop.is_alive()
