"""How fast a partitioned node is cut off: the supervisor looks once a second, start to start,
so the second a silent node's probe waited out is not followed by another second of sleep.
Three unanswered probes then cover three seconds without gaps (issue 29: they were spread over
five, a second's sleep after each one-second timeout)."""

from __future__ import annotations

import os
import threading
import time
import types
from pathlib import Path

import pytest

from jupyter_gtc import api
from jupyter_gtc.backends import supervisor as supervisor_module
from jupyter_gtc.backends.supervisor import SILENT_TICKS, TICK_S, Supervisor
from tests.conftest import sleep_until, small_gpu_spec
from tests.non_root import needs_root

pytestmark = pytest.mark.usefixtures("slurm_available")


@needs_root
def test_a_silent_nodes_probes_follow_each_other_without_a_second_of_sleep_between(monkeypatch):
    # No supervisor process of its own: this test's, in a thread, is the only one looking.
    cluster = api.create_cluster(small_gpu_spec("silent", nodes=2, supervisor=False, network="namespaces"))
    try:
        watcher = Supervisor(Path(os.environ["GTC_HOME"]), cluster.name)
        cut = cluster.nodes[0].name
        seen: list[tuple] = []  # the loop's own probes of ``cut`` and sleeps, in order
        real_answers = watcher.backend.node_answers

        def answers(runtime, node, *args, **kwargs):  # the real probe, its seconds noted
            began = time.monotonic()
            answered = real_answers(runtime, node, *args, **kwargs)
            if node == cut:
                seen.append(("probe", time.monotonic() - began, answered))
            return answered

        def sleep(seconds: float) -> None:
            seen.append(("sleep", seconds))
            time.sleep(seconds)

        monkeypatch.setattr(watcher.backend, "node_answers", answers)
        monkeypatch.setattr(supervisor_module, "time", types.SimpleNamespace(
            time=time.time, monotonic=time.monotonic, sleep=sleep))
        loop = threading.Thread(target=watcher.loop, daemon=True)
        loop.start()
        assert sleep_until(lambda: any(e == ("probe", e[1], True) for e in seen), 60), seen
        api.inject_fault(cluster.name, cut, "partition")

        def cut_off() -> bool:
            return any(e["node"] == cut and e["event"] == "unreachable" for e in api.cluster_events(cluster.name))

        assert sleep_until(cut_off, 60), seen
    finally:
        api.delete_cluster(cluster.name)  # the loop ends with its cluster
    loop.join(60)
    assert not loop.is_alive()
    first = next(i for i, e in enumerate(seen) if e[0] == "probe" and not e[2])
    silent = [i for i, e in enumerate(seen) if i >= first and e[0] == "probe"][:SILENT_TICKS]
    assert [seen[i][2] for i in silent] == [False] * SILENT_TICKS, seen
    # Between the silent probes the loop sleeps only what is left of its second: nothing once
    # the probe itself waited a whole one out.
    for before, after in zip(silent, silent[1:]):
        sleeps = [e[1] for e in seen[before:after] if e[0] == "sleep"]
        assert sum(sleeps) <= max(0.0, TICK_S - seen[before][1]) + 1e-9, seen
