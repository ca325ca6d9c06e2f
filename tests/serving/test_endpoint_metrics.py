"""``EndpointMetrics`` alone: ``requests.jsonl`` lines as the front writes them, read by new
bytes into a point a second (requests/s, errors/s, p50/p95 of the answered, replicas), each
request counted once however late its line comes, a half-written line left for the next read,
and the last read after an undeploy closing every bucket. A clock of the test's own: no sleeps."""

from __future__ import annotations

import json

from jupyter_gtc.services.endpoint_metrics import ERRORS, LATENCY, REPLICAS, REQUESTS, EndpointMetrics, percentile

START = 1_000.0


def write(path, *requests, tail: str = "") -> None:
    with open(path, "a") as f:
        for ended, status, seconds in requests:
            f.write(json.dumps({"time": ended, "status": status, "seconds": seconds, "replica": "7"}) + "\n")
        f.write(tail)


def by_tag(points, tag, run=""):
    return [(p.step, p.value) for p in points if p.tag == tag and p.run == run]


def test_requests_become_a_point_a_second_once_the_second_has_closed(tmp_path):
    path, now, replicas, deployed = tmp_path / "requests.jsonl", [START], [1], [True]
    feed = EndpointMetrics("1", path, START, replicas=lambda: replicas[0], deployed=lambda: deployed[0],
                           clock=lambda: now[0])
    got = []
    # The feed's own thread reads too, at the same (the test's) clock: whoever reads, the
    # subscriber gets each point once, and has it when refresh() returns.
    feed.subscribe(got.extend)
    feed.refresh()  # no file yet: nothing
    write(path, (START + 0.2, 200, 0.1), (START + 0.5, 200, 0.3), (START + 0.6, 200, 0.2), (START + 0.9, 429, 1e-4),
          (START + 2.3, 400, 1e-4), tail='{"time": 1003.1, "status": 2')  # the front is writing a line
    now[0] = START + 1.2  # second 0 ended, but lines of it may still be coming
    feed.refresh()
    assert got == []
    now[0] = START + 3.6
    feed.refresh()
    assert by_tag(got, REQUESTS) == [(0, 4), (1, 0), (2, 1)]
    assert by_tag(got, ERRORS) == [(0, 1), (1, 0), (2, 1)]
    assert by_tag(got, LATENCY, "p50") == [(0, 0.2)] and by_tag(got, LATENCY, "p95") == [(0, 0.3)]
    assert by_tag(got, REPLICAS) == [(2, 1)]

    # The half-written line is finished; a line of second 1, closed already, comes late: counted now.
    write(path, tail='00, "seconds": 0.5, "replica": "7"}\n')
    write(path, (START + 1.5, 200, 0.4))
    replicas[0] = 2
    now[0] = START + 4.6
    feed.refresh()
    assert by_tag(got, REQUESTS)[3:] == [(3, 2)] and by_tag(got, LATENCY, "p95")[1:] == [(3, 0.5)]
    assert by_tag(got, REPLICAS) == [(2, 1), (3, 2)]

    late = []  # a late subscriber gets every point so far
    feed.subscribe(late.extend)
    assert late == got

    # After the undeploy, the last read closes every bucket, the one still open too, and says 0 replicas.
    write(path, (START + 5.1, 503, 0.01))
    deployed[0] = False
    feed.refresh(final=True)
    assert by_tag(got, REQUESTS)[4:] == [(4, 0), (5, 1)] and by_tag(got, REPLICAS)[-1] == (5, 0)
    assert feed.finished and feed.refresh(final=True) == [] and late == got
    assert sum(v for _, v in by_tag(feed.all(), REQUESTS)) == 8  # every line counted once


def test_percentile_is_a_latency_one_request_took():
    assert percentile([0.1], 95) == 0.1
    assert percentile([0.1, 0.2, 0.3, 0.4], 50) == 0.2
    assert percentile([float(i) for i in range(1, 101)], 95) == 95.0
