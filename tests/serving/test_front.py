"""The endpoint's front on its own: once it stops, the replicas it names are final, so an
undeploy that read them cancels every replica's job, even one a scale-up or a replacement
started meanwhile (the health thread ends that one itself)."""

from __future__ import annotations

from jupyter_gtc.serving.front import Front, Replica


def test_a_stopped_front_takes_no_replica_so_the_undeploys_list_of_jobs_is_whole(tmp_path):
    first = Replica("11", "127.0.0.1", 1)
    front = Front("e1", [first], "token", "/health", "/predict", tmp_path / "requests.jsonl").start()
    assert front.add(Replica("12", "127.0.0.1", 2))
    front.stop()
    late, replacement = Replica("13", "127.0.0.1", 3), Replica("14", "127.0.0.1", 4)
    assert not front.add(late) and not front.replace(first, replacement)
    assert [r.job for r in front.replicas] == ["11", "12"]  # what the undeploy cancels
