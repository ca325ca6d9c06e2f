"""``GET clusters/<name>/events``: a cluster's remediation history, as the sidebar polls it.

The events are rows of the state store's ``cluster_events``, written here by the store's own
``add_event`` (the supervisor's one way of writing them: a real fault's events are in
tests/widgets/test_cluster_panel.py and tests/browser/test_sidebar.py), so the times are known."""

from __future__ import annotations

from jupyter_gtc.state import Store, default_home, open_store
from tests.server.api_client import call, ok
from tests.server.test_wire_types import interface_fields


def test_a_clusters_events_oldest_first_and_since_the_newest_one_had(jupyter_server, rest_cluster):
    name = rest_cluster.name
    status, body = call(jupyter_server, "GET", f"clusters/{name}/events", token=False)
    assert status == 403, body  # a login first, as every route

    before = ok(jupyter_server, "GET", f"clusters/{name}/events")["events"]
    store = open_store(default_home())
    store.add_event(name, "gpu-1", "detected", "its slurmd exited <pid 12> & gone")
    store.add_event(name, "gpu-1", "down", "set DOWN")
    store.add_event(name, "gpu-1", "restarted", "its slurmd runs again")
    events = ok(jupyter_server, "GET", f"clusters/{name}/events")["events"]
    assert events[:len(before)] == before
    mine = events[len(before):]
    assert [(e["node"], e["event"]) for e in mine] == [("gpu-1", "detected"), ("gpu-1", "down"),
                                                       ("gpu-1", "restarted")]
    assert mine[0]["detail"] == "its slurmd exited <pid 12> & gone"  # JSON as written: the UIs escape
    assert all(a["time"] <= b["time"] for a, b in zip(events, events[1:]))

    # since: only what is newer than the time given (the newest the caller has: nothing).
    newer = ok(jupyter_server, "GET", f"clusters/{name}/events?since={mine[0]['time']!r}")["events"]
    assert [e["event"] for e in newer] == ["down", "restarted"]
    assert ok(jupyter_server, "GET", f"clusters/{name}/events?since={mine[-1]['time']!r}")["events"] == []
    status, body = call(jupyter_server, "GET", f"clusters/{name}/events?since=yesterday")
    assert (status, body["kind"]) == (400, "BadRequest") and "since" in body["message"], body


def test_the_events_of_a_missing_cluster_are_a_404(jupyter_server):
    status, body = call(jupyter_server, "GET", "clusters/nosuchcluster/events")
    assert (status, body["kind"]) == (404, "ClusterNotFound"), body


def test_an_event_sends_what_the_sidebar_reads(tmp_path):
    store = Store(tmp_path / "state.db")
    store.add_event("c", "gpu-0", "hang", "job 7 wrote nothing for 3 s")
    assert set(store.events("c")[0]) == interface_fields("IClusterEvent")
