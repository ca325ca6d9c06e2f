"""The change feed (server-sent events) on a real cluster: a snapshot first, then job
changes made by other processes (a notebook, the CLI: here, the test) within a tick."""

from __future__ import annotations

from jupyter_gtc import api
from tests.conftest import small_gpu_spec
from tests.server.api_client import EventStream, ok, wait_for


def test_a_snapshot_then_the_changes_of_a_job_submitted_elsewhere(jupyter_server, rest_cluster):
    stream = EventStream(jupyter_server, f"?cluster={rest_cluster.name}")
    job = None
    try:
        assert stream.status == 200 and stream.headers["Content-Type"] == "text/event-stream"
        snapshot = stream.next("snapshot")
        assert snapshot["cluster"] == rest_cluster.name
        assert rest_cluster.name in [c["name"] for c in snapshot["clusters"]]

        # The feed delivers the job's change (how fast: bench/feed_latency.py).
        job = api.submit_job(rest_cluster.name, "#!/bin/bash\nsleep 600\n", ["--job-name=fed", "--gpus-per-node=2"])
        running = stream.next("job", where=lambda j: j["id"] == job.id and j["state"] == "RUNNING", timeout=60)
        assert running["name"] == "fed" and running["nodes"]
        # The node's GPUs show as allocated in a clusters event (sent with the job's, or soon after).
        wait_for(lambda: stream.seen("clusters", lambda d: sum(n["gpus_allocated"] for c in d["clusters"]
                                                               for n in c.get("nodes", [])) == 2),
                 timeout=60, what="2 GPUs allocated")

        ok(jupyter_server, "POST", f"jobs/{rest_cluster.name}/{job.id}/cancel")
        stream.next("job", where=lambda j: j["id"] == job.id and j["state"] == "CANCELLED")
    finally:
        stream.close()
        if job is not None:
            api.cancel_job(job.id, rest_cluster.name)


def test_a_cluster_deleted_elsewhere_leaves_the_feed(jupyter_server, slurm_available):
    api.create_cluster(small_gpu_spec("feedgone", nodes=1))
    stream = EventStream(jupyter_server, "?cluster=feedgone")
    try:
        assert "feedgone" in [c["name"] for c in stream.next("snapshot")["clusters"]]
        api.delete_cluster("feedgone")
        stream.next("clusters", where=lambda d: "feedgone" not in [c["name"] for c in d["clusters"]])
    finally:
        stream.close()
        if "feedgone" in [c.name for c in api.list_clusters(with_status=False)]:
            api.delete_cluster("feedgone")


def test_a_feed_for_no_cluster_or_an_unknown_one_still_starts_with_a_snapshot(jupyter_server):
    for query in ("", "?cluster=unknown"):
        stream = EventStream(jupyter_server, query)
        try:
            assert stream.next("snapshot", timeout=60)["jobs"] == []
        finally:
            stream.close()


def test_a_client_that_stops_reading_costs_a_bounded_queue_and_gets_a_snapshot_after():
    """Each connection's events wait in its queue until it reads them: one that never reads
    held every event in memory. Past the bound its queue is emptied and a snapshot is due."""
    import asyncio
    import threading

    from jupyter_gtc.server.feed import MAX_QUEUED_EVENTS, ChangeFeed

    async def flood() -> tuple[int, bool, bool]:
        feed = ChangeFeed()
        slow = feed.subscribe(None)
        feed.unsubscribe(slow)  # no tick of the feed's own: only the events below
        slow.needs_snapshot = False
        feed._subscriptions.add(slow)
        for i in range(MAX_QUEUED_EVENTS * 3):
            feed._broadcast("job", {"id": str(i)})
        size, wants_snapshot = slow.queue.qsize(), slow.needs_snapshot
        slow.close()  # a full queue still ends the connection's loop
        queued = [slow.queue.get_nowait() for _ in range(slow.queue.qsize())]
        feed._subscriptions.clear()
        return size, wants_snapshot, queued[-1]

    # On a thread of its own: a test before this one on the same worker may leave this
    # thread's event loop running (asyncio.run refuses to nest).
    result: list = []
    runner = threading.Thread(target=lambda: result.append(asyncio.run(flood())))
    runner.start()
    runner.join()
    size, wants_snapshot, last = result[0]
    assert size <= MAX_QUEUED_EVENTS and wants_snapshot and last == ("closed", None)
