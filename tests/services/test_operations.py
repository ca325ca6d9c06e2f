"""Background cluster operations, without a cluster: the claim in the caller, the work on a
thread, its progress, how it ends, and one operation per cluster at a time."""

from __future__ import annotations

import threading

import pytest

from jupyter_gtc.exceptions import ClusterBusy, ClusterExists, OperationNotFound, SpecError
from jupyter_gtc.services.operations import DONE, FAILED, RUNNING, Operations


def recorder(operations: Operations) -> list[tuple[str, str, str]]:
    seen: list[tuple[str, str, str]] = []
    operations.subscribe(lambda op: seen.append((op.action, op.state, op.message)))
    return seen


def test_the_claim_runs_in_the_caller_and_the_work_on_a_thread_with_its_progress():
    operations = Operations()
    seen = recorder(operations)
    release = threading.Event()
    threads = {}

    def work(claimed, progress):
        threads["work"] = threading.current_thread()
        progress("starting slurmd 1/2")
        release.wait(10)
        progress("starting slurmd 2/2")
        return claimed

    op = operations.start("create", "c", lambda: "claimed", work)
    assert op.state == RUNNING and threads.get("work") is not threading.current_thread()
    assert operations.get(op.id) is op and operations.list() == [op]
    release.set()
    assert op.wait(10) == "claimed"
    assert op.state == DONE and op.finished_at >= op.started_at and op.message == "starting slurmd 2/2"
    assert seen == [("create", RUNNING, ""), ("create", RUNNING, "starting slurmd 1/2"),
                    ("create", RUNNING, "starting slurmd 2/2"), ("create", DONE, "starting slurmd 2/2")]
    assert op.to_json()["error"] is None


def test_a_failed_claim_raises_in_the_caller_and_starts_nothing():
    operations = Operations()
    seen = recorder(operations)

    def claim():
        raise ClusterExists("c")

    with pytest.raises(ClusterExists):
        operations.start("create", "c", claim, lambda claimed, progress: None)
    assert operations.list() == [] and seen == []


def test_a_failure_in_the_work_ends_the_operation_with_its_error():
    operations = Operations()

    def work(claimed, progress):
        raise SpecError("nodes", 0, "at least 1")

    op = operations.start("scale", "c", lambda: None, work)
    with pytest.raises(SpecError):
        op.wait(10)
    assert op.state == FAILED
    assert op.to_json()["error"] == {"kind": "SpecError", "message": "nodes: 0 is not valid; at least 1"}


def test_an_unexpected_error_is_reported_without_its_details():
    operations = Operations()
    op = operations.start("delete", "c", lambda: None, lambda claimed, progress: {}["secret"])
    with pytest.raises(Exception, match="delete failed unexpectedly"):
        op.wait(10)
    assert op.to_json()["error"]["kind"] == "GtcError" and "secret" not in op.to_json()["error"]["message"]


def test_one_operation_per_cluster_at_a_time():
    operations = Operations()
    release = threading.Event()
    first = operations.start("scale", "c", lambda: None, lambda claimed, progress: release.wait(10))
    with pytest.raises(ClusterBusy, match="scale is running"):
        operations.start("delete", "c", lambda: None, lambda claimed, progress: None)
    other = operations.start("delete", "d", lambda: None, lambda claimed, progress: None)  # another cluster
    other.wait(10)
    release.set()
    first.wait(10)
    operations.start("delete", "c", lambda: None, lambda claimed, progress: None).wait(10)  # now it may


def test_finished_operations_are_forgotten_past_the_count_kept():
    operations = Operations(keep_count=3)
    ops = [operations.start("scale", f"c{i}", lambda: None, lambda claimed, progress: None) for i in range(5)]
    for op in ops:
        op.wait(10)
    operations.start("scale", "last", lambda: None, lambda claimed, progress: None).wait(10)
    kept = [op.cluster for op in operations.list()]
    assert len(kept) == 3 and kept[-1] == "last"
    with pytest.raises(OperationNotFound):
        operations.get(ops[0].id)
