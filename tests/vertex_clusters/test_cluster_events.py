"""A Vertex AI training cluster's own events (``clusterEvents``) in our History, and nodes
reported faulty through our verb (``gtc cluster report-faulty`` / ``api.report_faulty_node``).

Vertex AI is the local endpoint, run on a second GTC_HOME (as in test_vertex_backend_clusters):
a node reported faulty there is drained with the report's reason and replaced by the endpoint's
supervisor, which Vertex would do, and the drain and the replacement come back as the cluster's
``clusterEvents``. No request may leave the machine: proxies point at a port where nothing listens."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

import jupyter_gtc
from jupyter_gtc import api
from jupyter_gtc.exceptions import GtcError, SpecError
from jupyter_gtc.slurm.parse import NodeStatus
from jupyter_gtc.vertex_clusters.events import EventLog, history_rows, with_drain_reasons
from tests.conftest import sleep_until
from tests.vertex_clusters.conftest import local_vertex_endpoint

EXAMPLE = Path(jupyter_gtc.__file__).parent / "examples" / "clusters" / "local-a3.yaml"


@pytest.fixture(scope="module")
def vertex_home(slurm_available):
    """This test's GTC_HOME, with ``vertex.api_endpoint`` set to a local endpoint serving from another."""
    with local_vertex_endpoint("vxevhost", made=("vxev",), second_home="gtc-vxev-") as served:
        yield served.own


@pytest.mark.slurm
def test_a_node_reported_through_gtc_is_replaced_and_its_drain_and_replacement_join_the_history(
        vertex_home, capsys):
    from jupyter_gtc.cli import main

    def gtc(*args: str) -> tuple[int, str]:
        capsys.readouterr()
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out + err

    api.create_cluster(EXAMPLE.read_text().replace("display_name: demo", "display_name: vxev"), backend="vertex")
    before = {n.name: n.extra["physical_host"] for n in api.get_cluster("vxev").nodes}
    assert sorted(before) == ["a3-0", "a3-1"], before
    assert api.cluster_events("vxev") == []  # nothing has happened to its nodes yet
    # Its health view: each node's state and drain reason; our checks do not run there (Vertex runs its own).
    assert [(r["node"], r["verdict"]) for r in api.cluster_health("vxev")] == [("a3-0", "not checked"),
                                                                              ("a3-1", "not checked")]

    # A node Vertex does not list is refused, naming the field, the value and the nodes there are.
    code, out = gtc("cluster", "report-faulty", "vxev", "a3-9")
    assert code != 0 and "node" in out and "a3-9" in out and "a3-0, a3-1" in out and "vxev-a3-1" in out, out

    code, out = gtc("cluster", "report-faulty", "vxev", "a3-1", "--reason", "slow all-reduce",
                    "--behavior", "PERFORMANCE")
    assert code == 0, out
    assert "reporting node a3-1 of training cluster vxev faulty" in out, out
    assert "reported a3-1: Vertex replaces it" in out, out

    def replaced() -> list[dict] | None:
        events = api.cluster_events("vxev")
        done = [e for e in events if e["event"] == "VM_REPORT_AND_REPLACEMENT" and e["node"] == "a3-1"]
        return events if done else None

    assert sleep_until(replaced, timeout=180), api.cluster_events("vxev")
    events = replaced()
    kinds = [e["event"] for e in events if e["node"] == "a3-1"]
    # Oldest first, with the node and the reason: the drain (the report's reason) before the replacement.
    assert kinds.index("VM_SLURM_DRAIN") < kinds.index("VM_REPORT_AND_REPLACEMENT"), events
    drain = next(e for e in events if e["event"] == "VM_SLURM_DRAIN")
    assert drain["node"] == "a3-1" and "slow all-reduce" in drain["detail"], drain
    assert [e["time"] for e in events] == sorted(e["time"] for e in events)
    # Polled again (a describe's get), each event is there once (Google's window overlaps the last poll's).
    api.get_cluster("vxev")
    again = api.cluster_events("vxev")
    keys = [(e["time"], e["node"], e["event"], e["detail"]) for e in again]
    assert len(keys) == len(set(keys)) and again[:len(events)] == events, again

    # gtc shows the same History.
    code, out = gtc("cluster", "events", "vxev", "--json")
    assert code == 0 and [e["event"] for e in json.loads(out)][:len(events)] == [e["event"] for e in events], out
    code, out = gtc("cluster", "events", "vxev")
    assert code == 0 and "VM_SLURM_DRAIN" in out and "a3-1" in out, out

    # The node is back, on other hardware; the node it was not reported is untouched.
    def back() -> dict | None:
        nodes = {n.name: n for n in api.get_cluster("vxev").nodes}
        return nodes if nodes["a3-1"].state == "RUNNING" else None

    assert sleep_until(back, timeout=120), api.get_cluster("vxev").nodes
    nodes = back()
    assert nodes["a3-1"].extra["physical_host"] != before["a3-1"], nodes
    assert nodes["a3-0"].extra["physical_host"] == before["a3-0"], nodes

    # Vertex's own id of a node (CLUSTER-POOL-INDEX) and its default action (delete, no reason).
    lines: list[str] = []
    api.report_faulty_node("vxev", "vxev-a3-0", progress=lines.append)
    assert lines[0] == "reporting node vxev-a3-0 of training cluster vxev faulty", lines
    assert sleep_until(lambda: any(e["event"] == "VM_REPORT_AND_REPLACEMENT" and e["node"] == "a3-0"
                                   for e in api.cluster_events("vxev")), timeout=180), api.cluster_events("vxev")
    api.delete_cluster("vxev")


def test_reports_are_refused_with_the_field_named_before_any_call(tmp_path, monkeypatch):
    monkeypatch.setenv("GTC_HOME", str(tmp_path))
    with pytest.raises(SpecError) as refused:
        api.report_faulty_node("nosuch", "a3-0", behavior="slow", reason="slow all-reduce")
    assert "behavior" in str(refused.value) and "'slow'" in str(refused.value), refused.value
    assert "PERFORMANCE, SILENT_DATA_CORRUPTION, UNRECOVERABLE_GPU_ERROR" in str(refused.value), refused.value
    with pytest.raises(SpecError) as alone:  # a host report takes a behavior and a reason together
        api.report_faulty_node("nosuch", "a3-0", reason="ecc")
    assert alone.value.field == "behavior" and "physical host" in str(alone.value), alone.value
    with pytest.raises(GtcError) as missing:
        api.report_faulty_node("nosuch", "a3-0")
    assert "nosuch" in str(missing.value)


def cluster(create_time: str, *events: tuple[str, str, str, str]) -> dict:
    """A training cluster as a get returns it: ``clusterEvents`` newest first."""
    return {"createTime": create_time, "clusterEvents": [
        {"eventType": kind, "instanceName": node, "eventTime": when, "description": detail}
        for when, node, kind, detail in reversed(events)]}


DRAIN = ("2026-12-04T10:00:00.250000Z", "a3-1", "VM_SLURM_DRAIN", "gtc-reported: reported faulty: ecc")
REPLACED = ("2026-12-04T10:00:00.750000123Z", "a3-1", "VM_REPORT_AND_REPLACEMENT", "new VM")
LATER = ("2026-12-04T11:00:00Z", "a3-0", "VM_SLURM_DRAIN", "xid 79")


def test_the_history_keeps_each_event_once_across_polls_and_after_it_left_googles_window(tmp_path):
    log = EventLog(tmp_path, "vxev")
    first = log.merge(cluster("2026-12-04T09:00:00Z", DRAIN, REPLACED))
    assert [(e["node"], e["event"], e["detail"]) for e in first] == [
        ("a3-1", "VM_SLURM_DRAIN", "gtc-reported: reported faulty: ecc"), ("a3-1", "VM_REPORT_AND_REPLACEMENT", "new VM")]
    assert first[1]["time"] - first[0]["time"] == pytest.approx(0.5)  # fractions of a second (Google's nanos) kept
    # Merged a moment ago (a cluster list's get): the History is read without asking Vertex again.
    assert log.recent(60) == first and EventLog(tmp_path, "other").recent(60) is None
    # The next poll's window overlaps, and the drain has left it (Google keeps the newest 100).
    assert log.merge(cluster("2026-12-04T09:00:00Z", REPLACED, LATER)) == first + history_rows(
        cluster("", LATER)["clusterEvents"])
    assert stat.S_IMODE(log.path.stat().st_mode) == 0o600 and stat.S_IMODE(log.path.parent.stat().st_mode) == 0o700
    # A cluster made again under the id starts with no History; the API away: what is kept.
    assert log.merge(cluster("2026-12-05T09:00:00Z")) == []
    assert log.read() == []


def test_a_node_that_is_not_up_shows_its_newest_drain_reason():
    def node(name: str, state: str) -> NodeStatus:
        return NodeStatus(name, state, (), None, ("a3",), 0, 0, 0, 0, 8, 0)

    events = history_rows(cluster("", DRAIN, REPLACED, LATER)["clusterEvents"])
    shown = with_drain_reasons([node("a3-0", "IDLE+DRAIN"), node("a3-1", "RUNNING")], events)
    assert [(n.name, n.reason) for n in shown] == [("a3-0", "xid 79"), ("a3-1", None)]
